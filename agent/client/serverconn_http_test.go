package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// fakeNodeAPI is a server's node routes in miniature: it records requests
// and answers from canned data, or with a fixed status when down is set.
type fakeNodeAPI struct {
	mu       sync.Mutex
	down     int // status to answer with, 0 for normal service
	requests []string
	nodes    map[string]string // node ID -> secret
	updates  []*structs.Allocation
}

func (f *fakeNodeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	if f.down != 0 {
		w.WriteHeader(f.down)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "no cluster leader"})
		return
	}
	writeErr := func(code int, msg string) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/node/"), "/")
	if r.URL.Path == "/v1/node/register" {
		var req structs.NodeRegisterHTTPRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Node == nil {
			writeErr(400, "bad body")
			return
		}
		f.nodes[req.Node.ID] = req.SecretID
		_ = json.NewEncoder(w).Encode(structs.NodeHeartbeatHTTPResponse{HeartbeatTTL: 7 * time.Second})
		return
	}
	id := parts[0]
	secret, known := f.nodes[id]
	if !known {
		writeErr(404, "node not found")
		return
	}
	if r.Header.Get(structs.HeaderNodeSecret) != secret {
		writeErr(403, "permission denied")
		return
	}
	switch r.Method + " " + parts[1] {
	case "PUT heartbeat":
		_ = json.NewEncoder(w).Encode(structs.NodeHeartbeatHTTPResponse{HeartbeatTTL: 9 * time.Second})
	case "GET allocations":
		w.Header().Set("X-Gpulayer-Index", "17")
		w.Header().Set("X-Gpulayer-KnownLeader", "true")
		_ = json.NewEncoder(w).Encode([]*structs.Allocation{{ID: "a1", NodeID: id}})
	case "POST allocations":
		var req structs.NodeUpdateAllocsHTTPRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.updates = append(f.updates, req.Allocs...)
		_, _ = w.Write([]byte("{}"))
	default:
		writeErr(404, "no route")
	}
}

func (f *fakeNodeAPI) setDown(code int) {
	f.mu.Lock()
	f.down = code
	f.mu.Unlock()
}

func (f *fakeNodeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func newFakeNodeAPI(t *testing.T) (*fakeNodeAPI, *httptest.Server) {
	t.Helper()
	f := &fakeNodeAPI{nodes: map[string]string{}}
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	return f, ts
}

func TestHTTPServerConnCalls(t *testing.T) {
	f, ts := newFakeNodeAPI(t)
	conn, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: []string{strings.TrimPrefix(ts.URL, "http://")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	node := &structs.Node{ID: "node-1", SecretID: "s3cret", Name: "n1"}

	if _, err := conn.NodeUpdateStatus(ctx, "node-1", structs.NodeStatusReady); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("heartbeat before register: %v, want ErrNotFound", err)
	}
	ttl, err := conn.NodeRegister(ctx, node)
	if err != nil || ttl != 7*time.Second {
		t.Fatalf("register: %v %v", ttl, err)
	}
	if got := f.nodes["node-1"]; got != "s3cret" {
		t.Fatalf("server got secret %q", got)
	}
	ttl, err = conn.NodeUpdateStatus(ctx, "node-1", structs.NodeStatusReady)
	if err != nil || ttl != 9*time.Second {
		t.Fatalf("heartbeat: %v %v", ttl, err)
	}
	allocs, meta, err := conn.NodeAllocations(ctx, "node-1", &structs.QueryOptions{MinQueryIndex: 5, MaxQueryTime: time.Second})
	if err != nil || len(allocs) != 1 || allocs[0].ID != "a1" || meta.Index != 17 || !meta.KnownLeader {
		t.Fatalf("allocations: %v %+v %v", allocs, meta, err)
	}
	if last := f.requests[len(f.requests)-1]; !strings.Contains(last, "index=5") || !strings.Contains(last, "wait=1s") {
		t.Errorf("blocking query sent as %q", last)
	}
	if err := conn.UpdateAllocs(ctx, []*structs.Allocation{{ID: "a1", NodeID: "node-1", ClientStatus: structs.AllocClientStatusRunning}}); err != nil {
		t.Fatal(err)
	}
	if len(f.updates) != 1 || f.updates[0].ClientStatus != structs.AllocClientStatusRunning {
		t.Fatalf("updates: %+v", f.updates)
	}
}

// TestHTTPServerConnFailover: a dead server (connection refused) and one
// without a leader (503) are skipped; the call lands on the live one,
// which then gets the following calls first.
func TestHTTPServerConnFailover(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := dead.URL
	dead.Close()
	noLeader, noLeaderTS := newFakeNodeAPI(t)
	noLeader.setDown(http.StatusServiceUnavailable)
	live, liveTS := newFakeNodeAPI(t)

	conn, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: []string{deadAddr, noLeaderTS.URL, liveTS.URL}, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := conn.NodeRegister(ctx, &structs.Node{ID: "n", SecretID: "s", Name: "n"}); err != nil {
		t.Fatalf("register with one live server of three: %v", err)
	}
	if got := conn.Servers()[0]; got != liveTS.URL {
		t.Errorf("next call goes to %s, want the live %s", got, liveTS.URL)
	}
	before := noLeader.count()
	for i := 0; i < 3; i++ {
		if _, err := conn.NodeUpdateStatus(ctx, "n", structs.NodeStatusReady); err != nil {
			t.Fatal(err)
		}
	}
	if noLeader.count() != before {
		t.Errorf("calls after failover still went to the leaderless server")
	}
	if live.count() != 4 {
		t.Errorf("live server saw %d requests, want 4", live.count())
	}

	// Every server down: the error says so and wraps the last cause.
	live.setDown(http.StatusServiceUnavailable)
	_, err = conn.NodeUpdateStatus(ctx, "n", structs.NodeStatusReady)
	if !errors.Is(err, ErrNoServers) || !errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("all down: %v, want ErrNoServers wrapping ErrNoLeader", err)
	}
}

// TestHTTPServerConnNoRetryOn4xx: a client error would be the same on
// every server, so it is not retried elsewhere.
func TestHTTPServerConnNoRetryOn4xx(t *testing.T) {
	a, aTS := newFakeNodeAPI(t)
	b, bTS := newFakeNodeAPI(t)
	conn, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: []string{aTS.URL, bTS.URL}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := conn.NodeUpdateStatus(ctx, "unknown", structs.NodeStatusReady); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
	a.nodes["n"] = "other-secret"
	if _, err := conn.NodeRegister(ctx, &structs.Node{ID: "n2", SecretID: "mine", Name: "n2"}); err != nil {
		t.Fatal(err)
	}
	conn.mu.Lock()
	conn.secrets["n"] = "wrong"
	conn.mu.Unlock()
	if _, err := conn.NodeUpdateStatus(ctx, "n", structs.NodeStatusReady); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("wrong secret: %v, want ErrPermissionDenied", err)
	}
	if b.count() != 0 {
		t.Errorf("4xx answers were retried on the second server (%d requests)", b.count())
	}
}

func TestHTTPServerConnContextCanceled(t *testing.T) {
	block := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); ts.Close() })
	other, otherTS := newFakeNodeAPI(t)
	conn, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: []string{ts.URL, otherTS.URL}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err = conn.NodeAllocations(ctx, "n", &structs.QueryOptions{MinQueryIndex: 1, MaxQueryTime: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline error", err)
	}
	if other.count() != 0 {
		t.Errorf("a canceled call moved on to another server")
	}
}

func TestHTTPServerConnBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []string
		want    string
	}{
		{"no servers", nil, "at least one"},
		{"empty address", []string{""}, "servers[0]: empty"},
		{"no port", []string{"10.0.0.1"}, "host:port"},
		{"port not a number", []string{"10.0.0.1:http"}, "port"},
		{"port out of range", []string{"10.0.0.1:70000"}, "port"},
		{"second bad", []string{"a:1", "ftp://b:2"}, "servers[1]: server address \"ftp://b:2\": scheme"},
		{"path", []string{"http://a:1/v1"}, "path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: tc.servers})
			if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
	conn, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.NodeRegister(context.Background(), &structs.Node{ID: "n"}); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("register without secret: %v", err)
	}
	if err := conn.UpdateAllocs(context.Background(), []*structs.Allocation{{ID: "a"}}); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("update without NodeID: %v", err)
	}
	if err := conn.UpdateAllocs(context.Background(), []*structs.Allocation{nil}); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("update with nil alloc: %v", err)
	}
}

// FuzzParseServerAddr: any string gives an address or an error, never a
// panic, and an accepted address has an http(s) scheme and a host.
func FuzzParseServerAddr(f *testing.F) {
	for _, s := range []string{"a:1", "http://a:1", "https://[::1]:4656", "", ":", "a:99999", "http://", "x://y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseServerAddr(s)
		if err != nil {
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			t.Fatalf("accepted %q as %v", s, u)
		}
	})
}
