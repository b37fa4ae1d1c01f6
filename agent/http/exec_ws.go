package http

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpulayer/gpulayer/structs"
)

// Nomad's exec protocol (issue 12): GET /v1/client/allocation/{id}/exec
// ?task=&tty=&command=["cmd","arg"] upgraded to a WebSocket, JSON text
// messages both ways. The client sends {"stdin":{"data":"<base64>"}},
// {"stdin":{"close":true}} and {"tty_size":{"height":H,"width":W}}, and
// "{}" as a heartbeat; the server sends {"stdout":{"data":...}},
// {"stderr":{"data":...}} and, last, {"exited":true,"result":
// {"exit_code":N}}. An error ends the session with a close frame whose
// text is the error.

// execWSMaxMessage bounds one client message: a stdin chunk of Nomad's
// client is 2 KiB, base64 in JSON; 1 MiB leaves room for any client.
const execWSMaxMessage = 1 << 20

// execWSInput is a client message.
type execWSInput struct {
	Stdin *struct {
		Data  []byte `json:"data,omitempty"`
		Close bool   `json:"close,omitempty"`
	} `json:"stdin,omitempty"`
	TTYSize *struct {
		Height int `json:"height,omitempty"`
		Width  int `json:"width,omitempty"`
	} `json:"tty_size,omitempty"`
}

// execWSIO is a stream's part of a server message.
type execWSIO struct {
	Data  []byte `json:"data,omitempty"`
	Close bool   `json:"close,omitempty"`
}

// execWSOutput is a server message.
type execWSOutput struct {
	Stdout *execWSIO `json:"stdout,omitempty"`
	Stderr *execWSIO `json:"stderr,omitempty"`
	Exited bool      `json:"exited,omitempty"`
	Result *struct {
		ExitCode int `json:"exit_code"`
	} `json:"result,omitempty"`
}

// execUpgrader refuses a cross-origin upgrade (gorilla's default origin
// check): a web page elsewhere cannot open an exec session with the
// browser's cookies.
var execUpgrader = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 32 << 10}

// isWebSocket reports whether r asks for a WebSocket upgrade.
func isWebSocket(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }

// webSocketHeaders are the request headers a proxied upgrade must keep.
var webSocketHeaders = []string{"Connection", "Upgrade", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions", "Sec-Websocket-Protocol"}

// allocExecWS runs one exec session of Nomad's WebSocket protocol on this
// agent's client. Bad parameters are answered before the upgrade, as
// plain HTTP errors.
func (h *handler) allocExecWS(w http.ResponseWriter, r *http.Request, actor allocActor, alloc *structs.Allocation) {
	q := r.URL.Query()
	var cmd []string
	if err := json.Unmarshal([]byte(q.Get("command")), &cmd); err != nil || len(cmd) == 0 {
		h.writeError(w, r, badRequest("command parameter must be a non-empty JSON list of strings, e.g. [\"env\"]"))
		return
	}
	tty, err := parseBool(r, "tty")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !isWebSocket(r) {
		h.writeError(w, r, badRequest("this route speaks Nomad's exec protocol over a WebSocket; POST /v1/allocation/{id}/exec streams frames over plain HTTP"))
		return
	}
	conn, err := execUpgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered the error
	}
	defer conn.Close()
	// The body deadline of the HTTP server does not apply to a session.
	_ = conn.NetConn().SetDeadline(time.Time{})
	conn.SetReadLimit(execWSMaxMessage)

	var wmu sync.Mutex
	send := func(v *execWSOutput) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		return conn.WriteJSON(v)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 24*time.Hour)
	defer cancel()
	stdinR, stdinW := io.Pipe()
	go func() {
		// Reads end when the session ends: conn.Close below.
		defer stdinW.Close()
		for {
			var in execWSInput
			if err := conn.ReadJSON(&in); err != nil {
				// The client went away: end the command too.
				cancel()
				return
			}
			if in.Stdin != nil {
				if len(in.Stdin.Data) > 0 {
					if _, err := stdinW.Write(in.Stdin.Data); err != nil {
						return
					}
				}
				if in.Stdin.Close {
					_ = stdinW.Close()
				}
			}
			// tty_size and heartbeats: the driver's exec has no resize.
		}
	}()
	stdout := &wsStream{send: send, stdout: true}
	stderr := &wsStream{send: send}
	code, err := actor.AllocExec(ctx, alloc.ID, q.Get("task"), cmd, tty, stdinR, stdout, stderr)
	_ = stdinR.Close()
	if err != nil {
		msg := err.Error()
		if len(msg) > 120 {
			msg = msg[:120] // a close frame holds 123 bytes of text
		}
		wmu.Lock()
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseInternalServerErr, msg), time.Now().Add(5*time.Second))
		wmu.Unlock()
		return
	}
	_ = send(&execWSOutput{Stdout: &execWSIO{Close: true}})
	_ = send(&execWSOutput{Stderr: &execWSIO{Close: true}})
	_ = send(&execWSOutput{Exited: true, Result: &struct {
		ExitCode int `json:"exit_code"`
	}{code}})
	wmu.Lock()
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(5*time.Second))
	wmu.Unlock()
}

// wsStream is an exec output stream sent as WebSocket messages.
type wsStream struct {
	send   func(*execWSOutput) error
	stdout bool
}

func (s *wsStream) Write(p []byte) (int, error) {
	// WriteJSON encodes p before Write returns; the caller may reuse it.
	out := &execWSOutput{}
	if s.stdout {
		out.Stdout = &execWSIO{Data: p}
	} else {
		out.Stderr = &execWSIO{Data: p}
	}
	if err := s.send(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Hijack lets a WebSocket upgrade take the connection over (exec_ws.go);
// the request log records 101.
func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if s.status == 0 {
		s.status = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(s.ResponseWriter).Hijack()
}

// keepWebSocketHeaders copies the upgrade headers of r into hdr, for a
// proxied exec session.
func keepWebSocketHeaders(r *http.Request, hdr http.Header) {
	for _, k := range webSocketHeaders {
		if v := r.Header.Values(k); len(v) > 0 {
			hdr[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
		}
	}
	if !strings.EqualFold(hdr.Get("Upgrade"), "websocket") {
		hdr.Del("Upgrade")
	}
}
