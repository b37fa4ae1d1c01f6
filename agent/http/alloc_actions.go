package http

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// drainServer is what the drain, eligibility and alloc stop routes need
// from the server (*server.Server implements it).
type drainServer interface {
	NodeUpdateDrain(ctx context.Context, req *server.NodeDrainRequest) (uint64, error)
	NodeUpdateEligibility(ctx context.Context, nodeID, eligibility string) (uint64, error)
	AllocStop(ctx context.Context, allocID string) (string, uint64, error)
}

// allocActor is what the alloc signal, restart and exec routes need from
// the local client (*client.Client implements it).
type allocActor interface {
	AllocSignal(ctx context.Context, allocID, task, signal string) error
	AllocRestart(ctx context.Context, allocID, task string) error
	AllocExec(ctx context.Context, allocID, task string, cmd []string, tty bool, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

// actionRoutes registers the routes that act on allocations and nodes.
// Stop, drain and eligibility change cluster state (leader routes); signal,
// restart and exec run on the agent of the allocation's node, proxied
// there when it is another agent.
func (h *handler) actionRoutes() {
	h.handle("POST /v1/allocation/{id}/stop", h.allocStop)
	h.handle("POST /v1/node/{id}/drain", h.nodeDrain)
	h.handle("POST /v1/node/{id}/eligibility", h.nodeEligibility)
	h.mux.HandleFunc("POST /v1/allocation/{id}/signal", h.onAllocNode(h.allocSignal))
	h.mux.HandleFunc("POST /v1/allocation/{id}/restart", h.onAllocNode(h.allocRestart))
	h.mux.HandleFunc("POST /v1/allocation/{id}/exec", h.onAllocNode(h.allocExec))
}

func (h *handler) drainSrv() (drainServer, error) {
	d, ok := h.srv.(drainServer)
	if !ok {
		return nil, fmt.Errorf("%w: this agent's server does not support drains", structs.ErrInvalid)
	}
	return d, nil
}

// allocStop handles POST /v1/allocation/{id}/stop.
func (h *handler) allocStop(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	d, err := h.drainSrv()
	if err != nil {
		return nil, err
	}
	evalID, index, err := d.AllocStop(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	setIndex(w, index)
	return &api.AllocStopResponse{EvalID: evalID, Index: index}, nil
}

// decodeAction reads a small JSON request body into out; an empty body
// leaves out as is.
func (h *handler) decodeAction(r *http.Request, out interface{}) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil && !errors.Is(err, io.EOF) {
		return badRequest("invalid request body: %v", err)
	}
	return nil
}

// nodeDrain handles POST /v1/node/{id}/drain with an api.NodeDrainRequest.
func (h *handler) nodeDrain(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	d, err := h.drainSrv()
	if err != nil {
		return nil, err
	}
	var req api.NodeDrainRequest
	if err := h.decodeAction(r, &req); err != nil {
		return nil, err
	}
	index, err := d.NodeUpdateDrain(r.Context(), &server.NodeDrainRequest{
		NodeID: r.PathValue("id"), Enable: req.Enable, Deadline: req.Deadline, KeepIneligible: req.KeepIneligible,
	})
	if err != nil {
		return nil, err
	}
	setIndex(w, index)
	return &api.NodeWriteResponse{Index: index}, nil
}

// nodeEligibility handles POST /v1/node/{id}/eligibility.
func (h *handler) nodeEligibility(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	d, err := h.drainSrv()
	if err != nil {
		return nil, err
	}
	var req api.NodeEligibilityRequest
	if err := h.decodeAction(r, &req); err != nil {
		return nil, err
	}
	index, err := d.NodeUpdateEligibility(r.Context(), r.PathValue("id"), req.Eligibility)
	if err != nil {
		return nil, err
	}
	setIndex(w, index)
	return &api.NodeWriteResponse{Index: index}, nil
}

// onAllocNode runs fn when the allocation runs on this agent's node, and
// otherwise proxies the request to the agent of its node.
func (h *handler) onAllocNode(fn func(w http.ResponseWriter, r *http.Request, actor allocActor, alloc *structs.Allocation)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		alloc, _, err := h.srv.AllocGet(r.Context(), r.PathValue("id"), &structs.QueryOptions{AllowStale: true})
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if h.client != nil {
			if n := h.client.Node(); n != nil && n.ID == alloc.NodeID {
				actor, ok := h.client.(allocActor)
				if !ok {
					h.writeError(w, r, fmt.Errorf("%w: this agent's client cannot act on allocations", structs.ErrInvalid))
					return
				}
				fn(w, r, actor, alloc)
				return
			}
		}
		if proxied(r) {
			h.writeError(w, r, fmt.Errorf("allocation %q does not run on this agent's node: %w", alloc.ID, structs.ErrNotFound))
			return
		}
		node, _, err := h.srv.NodeGet(r.Context(), alloc.NodeID, &structs.QueryOptions{AllowStale: true})
		if err != nil {
			h.writeError(w, r, fmt.Errorf("node %q of allocation %q: %w", alloc.NodeID, alloc.ID, err))
			return
		}
		if node.HTTPAddr == "" {
			h.writeError(w, r, fmt.Errorf("node %q has no HTTP address", node.ID))
			return
		}
		target, err := h.peers.nodeURL(node.HTTPAddr)
		if err != nil {
			h.writeError(w, r, fmt.Errorf("node %q HTTP address %q: %w", node.ID, node.HTTPAddr, err))
			return
		}
		// The caller's right was checked here; the node's agent gets the
		// node's secret and the allow-listed headers, never the caller's
		// token or cookies (node_proxy.go).
		hdr, err := h.nodeProxyHeader(r, node.ID)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = target.Host
				pr.Out.Header = hdr.Clone()
			},
			FlushInterval: -1,
			Transport:     h.peers.nodeAction,
		}
		if isWebSocket(r) {
			// Nomad's exec session (exec_ws.go): the node's agent
			// answers 101 and the proxy joins the two connections.
			keepWebSocketHeaders(r, hdr)
			rp.ServeHTTP(w, r)
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/exec") {
			// A small action body is sent whole, with its length, so the
			// node agent can never answer while it is still arriving.
			b, err := io.ReadAll(r.Body)
			if err != nil {
				h.writeError(w, r, badRequest("reading the request body: %v", err))
				return
			}
			out := r.Clone(r.Context())
			out.Body = io.NopCloser(bytes.NewReader(b))
			out.ContentLength = int64(len(b))
			rp.ServeHTTP(w, out)
			return
		}
		// Exec streams stdin after the answer has started: the client's
		// connection is not reused, since the deadline below may leave
		// unread bytes on it.
		w.Header().Set("Connection", "close")
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		// The body is copied through a pipe this handler owns, so no read
		// of the server's request body outlives the handler (exec streams
		// stdin while the answer streams back).
		body, bodyW := io.Pipe()
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			_, err := io.Copy(bodyW, r.Body)
			bodyW.CloseWithError(err)
		}()
		out := r.Clone(r.Context())
		out.Body = body
		rp.ServeHTTP(w, out)
		_ = body.Close()
		_ = rc.SetReadDeadline(time.Now())
		<-copied
	}
}

func (h *handler) allocSignal(w http.ResponseWriter, r *http.Request, actor allocActor, alloc *structs.Allocation) {
	var req api.AllocSignalRequest
	if err := h.decodeAction(r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if strings.TrimSpace(req.Signal) == "" {
		h.writeError(w, r, badRequest("Signal is required, e.g. \"SIGHUP\""))
		return
	}
	if err := actor.AllocSignal(r.Context(), alloc.ID, req.Task, req.Signal); err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (h *handler) allocRestart(w http.ResponseWriter, r *http.Request, actor allocActor, alloc *structs.Allocation) {
	var req api.AllocRestartRequest
	if err := h.decodeAction(r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	task := req.Task
	if task == "" {
		task = req.TaskName
	}
	if req.AllTasks && task != "" {
		h.writeError(w, r, badRequest("AllTasks and a task name are exclusive"))
		return
	}
	if err := actor.AllocRestart(r.Context(), alloc.ID, task); err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// frameWriter writes one stream of exec output as frames, flushing each.
type frameWriter struct {
	mu  *sync.Mutex
	bw  *bufio.Writer
	rc  *http.ResponseController
	typ byte
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	total := len(p)
	for len(p) > 0 {
		n := min(len(p), api.MaxExecFrame)
		if err := api.WriteExecFrame(f.bw, f.typ, p[:n]); err != nil {
			return 0, err
		}
		p = p[n:]
	}
	if err := f.bw.Flush(); err != nil {
		return 0, err
	}
	_ = f.rc.Flush()
	return total, nil
}

// discardExecBody reads what a client already sent of a refused exec's
// stdin (at most 64 KiB, for at most 1 second) before the error answer:
// answering while the client still writes would close the connection under
// it, and the client would see a broken pipe instead of the error.
func discardExecBody(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.CopyN(io.Discard, r.Body, 64<<10)
	_ = rc.SetReadDeadline(time.Time{})
}

// allocExec handles POST /v1/allocation/{id}/exec?task=&tty=&command=[...]:
// stdin frames come in the request body, output frames and the exit code
// go out in the response (see api.ExecFrameStdin).
func (h *handler) allocExec(w http.ResponseWriter, r *http.Request, actor allocActor, alloc *structs.Allocation) {
	q := r.URL.Query()
	var cmd []string
	if err := json.Unmarshal([]byte(q.Get("command")), &cmd); err != nil || len(cmd) == 0 {
		discardExecBody(w, r)
		h.writeError(w, r, badRequest("command parameter must be a non-empty JSON list of strings, e.g. [\"env\"]"))
		return
	}
	tty, err := parseBool(r, "tty")
	if err != nil {
		discardExecBody(w, r)
		h.writeError(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	var mu sync.Mutex
	bw := bufio.NewWriter(w)
	stdout := &frameWriter{mu: &mu, bw: bw, rc: rc, typ: api.ExecFrameStdout}
	stderr := &frameWriter{mu: &mu, bw: bw, rc: rc, typ: api.ExecFrameStderr}
	stdinR, stdinW := io.Pipe()
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		defer stdinW.Close()
		for {
			typ, p, err := api.ReadExecFrame(r.Body)
			if err != nil {
				return
			}
			if typ == api.ExecFrameStdinEOF {
				// Read the body to its end, so the connection closes
				// cleanly under a proxy still sending it.
				_, _ = io.Copy(io.Discard, r.Body)
				return
			}
			if typ == api.ExecFrameStdin {
				if _, err := stdinW.Write(p); err != nil {
					return
				}
			}
		}
	}()
	ctx, cancel := context.WithTimeout(r.Context(), 24*time.Hour)
	defer cancel()
	code, err := actor.AllocExec(ctx, alloc.ID, q.Get("task"), cmd, tty, stdinR, stdout, stderr)
	_ = stdinR.Close()
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		_ = api.WriteExecFrame(bw, api.ExecFrameError, []byte(err.Error()))
	} else {
		_ = api.WriteExecFrame(bw, api.ExecFrameExit, []byte(strconv.Itoa(code)))
	}
	_ = bw.Flush()
	_ = rc.Flush()
	// End the stdin reader before returning: the server must not read the
	// request body concurrently with the next request. A client whose stdin
	// has ended gets a moment to finish sending, so a proxy relaying the
	// body is not cut off mid-write.
	select {
	case <-stdinDone:
		return
	case <-time.After(time.Second):
	}
	_ = rc.SetReadDeadline(time.Now())
	<-stdinDone
}
