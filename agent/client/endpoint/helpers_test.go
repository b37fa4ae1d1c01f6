package endpoint

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

const testModel = "llama-3-8b"

var testIdentity = structs.EndpointIdentity{JobVersion: 1, ArtifactDigest: "sha256:aaaa", ConfigDigest: "sha256:cccc"}

// reqIDHeader carries a test request's ID to the members' request logs.
const reqIDHeader = "X-Test-Req"

// fakeMember is an OpenAI-shaped model server that logs every request it
// receives (its X-Test-Req) before doing anything else.
type fakeMember struct {
	id  string
	srv *httptest.Server

	model        atomic.Pointer[string]
	modelsStatus atomic.Int32 // non-zero: the models listing answers it
	conns        atomic.Int64 // connections accepted

	mu  sync.Mutex
	log []string // "METHOD /path id" of every request but the listing

	holdOnce sync.Once
	hold     chan struct{} // /slow, /stream and /sleep wait for it
	started  chan string   // /slow, /stream, /sleep send their request ID
}

func newFakeMember(t testing.TB, id string) *fakeMember {
	t.Helper()
	fm := &fakeMember{id: id, hold: make(chan struct{}), started: make(chan string, 16)}
	model := testModel
	fm.model.Store(&model)
	fm.srv = httptest.NewUnstartedServer(http.HandlerFunc(fm.serve))
	fm.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			fm.conns.Add(1)
		}
	}
	fm.srv.Start()
	t.Cleanup(func() {
		fm.release()
		fm.srv.Close()
	})
	return fm
}

func (fm *fakeMember) addr() string { return fm.srv.Listener.Addr().String() }

func (fm *fakeMember) setModel(m string) { fm.model.Store(&m) }

// release lets the held requests finish.
func (fm *fakeMember) release() { fm.holdOnce.Do(func() { close(fm.hold) }) }

// kill closes the member's listener and every connection to it, as a
// member process that exits.
func (fm *fakeMember) kill() {
	_ = fm.srv.Listener.Close()
	fm.srv.CloseClientConnections()
}

// requests returns the member's request log.
func (fm *fakeMember) requests() []string {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return append([]string(nil), fm.log...)
}

// saw reports whether the member received the request with ID id.
func (fm *fakeMember) saw(id string) int {
	n := 0
	for _, l := range fm.requests() {
		if len(l) >= len(id) && l[len(l)-len(id):] == id {
			n++
		}
	}
	return n
}

func (fm *fakeMember) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == structs.DefaultEndpointModelsPath {
		if st := fm.modelsStatus.Load(); st != 0 {
			http.Error(w, "listing broken", int(st))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"object": "list",
			"data":   []map[string]any{{"id": *fm.model.Load(), "object": "model"}},
		})
		return
	}
	id := r.Header.Get(reqIDHeader)
	fm.mu.Lock()
	fm.log = append(fm.log, r.Method+" "+r.URL.Path+" "+id)
	fm.mu.Unlock()
	switch r.URL.Path {
	case "/hello":
		_, _ = io.WriteString(w, "hello from "+fm.id)
	case "/headers":
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "member hop header")
		_ = json.NewEncoder(w).Encode(r.Header)
	case "/echo":
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(b)
	case "/fail500":
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "member error from "+fm.id, http.StatusInternalServerError)
	case "/break":
		// Read the request, then drop the connection without answering.
		_, _ = io.Copy(io.Discard, r.Body)
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = c.Close()
		}
	case "/slow", "/sleep":
		fm.started <- id
		select {
		case <-fm.hold:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "slow from "+fm.id)
	case "/stream":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		_ = http.NewResponseController(w).Flush()
		fm.started <- id
		select {
		case <-fm.hold:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: second\n\n")
	default:
		http.NotFound(w, r)
	}
}

func testLogger() hclog.Logger {
	if os.Getenv("ENDPOINT_TEST_LOG") != "" {
		return hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: os.Stderr})
	}
	return hclog.NewNullLogger()
}

// members makes one admissible Member per fake member, Index in order.
func members(fms ...*fakeMember) []Member {
	out := make([]Member, len(fms))
	for i, fm := range fms {
		out[i] = Member{AllocID: fm.id, Index: i, Addr: fm.addr(), Identity: testIdentity, ChecksPassing: true}
	}
	return out
}

// startRouter starts a router on 127.0.0.1:0 with a fast verification
// period, after mod changed its config, and closes it at cleanup.
func startRouter(t testing.TB, mod func(*Config)) *Router {
	t.Helper()
	cfg := Config{
		Endpoint:       &structs.Endpoint{Name: "llm", Port: 9000, Model: testModel},
		ListenAddr:     "127.0.0.1:0",
		Logger:         testLogger(),
		VerifyInterval: 50 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// waitAdmitted waits until exactly the members ids are admitted.
func waitAdmitted(t testing.TB, r *Router, ids ...string) {
	t.Helper()
	want := fmt.Sprint(ids)
	waittest.For(t, 10*time.Second, "admitted members "+want, func() (bool, string) {
		var got []string
		desc := ""
		for _, m := range r.Status().Members {
			if m.Admitted {
				got = append(got, m.AllocID)
			} else {
				desc += fmt.Sprintf(" %s: %s;", m.AllocID, m.Reason)
			}
		}
		if got == nil {
			got = []string{}
		}
		return fmt.Sprint(got) == want, fmt.Sprint(got) + desc
	})
}

// reason returns the admission reason of member id.
func reason(r *Router, id string) string {
	for _, m := range r.Status().Members {
		if m.AllocID == id {
			return m.Reason
		}
	}
	return "(no such member)"
}

// testClient is a keep-alive HTTP client with a deadline.
func testClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// get sends GET path with request ID id and returns status, the serving
// member and the body.
func get(t *testing.T, c *http.Client, r *Router, path, id string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+r.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(reqIDHeader, id)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s (%s): %v", path, id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s (%s): reading body: %v", path, id, err)
	}
	return resp.StatusCode, resp.Header.Get(MemberHeader), string(b)
}

// recvWithin receives from ch or fails after d.
func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
	var zero T
	return zero
}
