package http

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// fakeCluster is a fakeServer that also implements ClusterServer.
type fakeCluster struct {
	*fakeServer
	cmu        sync.Mutex
	leader     bool
	leaderHTTP string
	verifyErr  error
	verifies   int
	removed    string
	removeErr  error
	snapshot   []byte
	saveErr    error
	restored   []byte
	joined     []string
	joinErr    error
}

func newFakeCluster(leader bool) *fakeCluster {
	return &fakeCluster{fakeServer: newFakeServer(), leader: leader, snapshot: []byte("GPULBKUP-archive-bytes")}
}

func (f *fakeCluster) IsLeader() bool {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	return f.leader
}

func (f *fakeCluster) LeaderHTTPAddr() string {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	return f.leaderHTTP
}

func (f *fakeCluster) VerifyLeader(ctx context.Context) error {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	f.verifies++
	return f.verifyErr
}

func (f *fakeCluster) RaftPeers() ([]server.RaftPeer, error) {
	return []server.RaftPeer{{ID: "a", Address: "10.0.0.1:4657", Leader: true, Voter: true}, {ID: "b", Address: "10.0.0.2:4657", Voter: true}}, nil
}

func (f *fakeCluster) RemoveRaftPeer(ctx context.Context, idOrAddr string) error {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	f.removed = idOrAddr
	return f.removeErr
}

func (f *fakeCluster) SnapshotSave(ctx context.Context, w io.Writer) error {
	if f.saveErr != nil {
		return f.saveErr
	}
	_, err := w.Write(f.snapshot)
	return err
}

func (f *fakeCluster) SnapshotRestore(ctx context.Context, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(b, []byte("GPULBKUP")) {
		return fmt.Errorf("%w: bad snapshot archive", structs.ErrInvalid)
	}
	f.cmu.Lock()
	f.restored = b
	f.cmu.Unlock()
	return nil
}

func (f *fakeCluster) Members() []server.Member {
	return []server.Member{{Name: "a", Addr: "10.0.0.1:4658", Status: server.MemberAlive, Datacenter: "dc1", RaftAddr: "10.0.0.1:4657", HTTPAddr: "10.0.0.1:4656", BootstrapExpect: 3, Leader: true}}
}

func (f *fakeCluster) Join(addrs []string) (int, error) {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	f.joined = addrs
	return len(addrs), f.joinErr
}

// seen returns the last job, purge flag and query options the fake saw.
func (f *fakeCluster) seen() (*structs.Job, bool, *structs.QueryOptions) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastJob, f.lastPurge, f.lastQuery
}

func (f *fakeCluster) resetQuery() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastQuery = nil
}

func (f *fakeCluster) verifyCount() int {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	return f.verifies
}

// serve starts an API handler over srv.
func serve(t *testing.T, srv Server) *httptest.Server {
	t.Helper()
	h, err := New(Config{Server: srv, MaxBodyBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

func hostOf(ts *httptest.Server) string { return strings.TrimPrefix(ts.URL, "http://") }

func TestForward_WritesAndConsistentReads(t *testing.T) {
	leader := newFakeCluster(true)
	leader.jobs["hello-gpu"] = &structs.Job{ID: "hello-gpu"}
	lts := serve(t, leader)
	follower := newFakeCluster(false)
	follower.leaderHTTP = hostOf(lts)
	fts := serve(t, follower)

	// A write to the follower runs on the leader.
	resp, body := doReq(t, "PUT", fts.URL+"/v1/jobs", jobBody)
	if resp.StatusCode != 200 || !strings.Contains(body, `"EvalID": "eval-hello-gpu"`) {
		t.Fatalf("forwarded register: %d %s", resp.StatusCode, body)
	}
	if j, _, _ := leader.seen(); j == nil || j.ID != "hello-gpu" {
		t.Fatalf("leader did not receive the write: %+v", j)
	}
	if j, _, _ := follower.seen(); j != nil {
		t.Fatal("the follower ran the write itself")
	}
	resp, _ = doReq(t, "DELETE", fts.URL+"/v1/job/hello-gpu?purge=true", "")
	if _, purge, _ := leader.seen(); resp.StatusCode != 200 || !purge {
		t.Fatalf("forwarded deregister: %d purge=%v", resp.StatusCode, purge)
	}

	// A default read is answered by the leader; ?stale by the follower.
	leader.resetQuery()
	if resp, _ := doReq(t, "GET", fts.URL+"/v1/jobs", ""); resp.StatusCode != 200 {
		t.Fatalf("default read: %d", resp.StatusCode)
	}
	if _, _, q := follower.seen(); q != nil {
		t.Fatal("a default read ran on the follower")
	}
	if _, _, q := leader.seen(); q == nil || q.AllowStale {
		t.Fatalf("a default read did not run on the leader as a non-stale read: %+v", q)
	}
	if resp, _ := doReq(t, "GET", fts.URL+"/v1/jobs?stale", ""); resp.StatusCode != 200 {
		t.Fatalf("stale read: %d", resp.StatusCode)
	}
	if _, _, q := follower.seen(); q == nil || !q.AllowStale {
		t.Fatalf("a stale read did not run on the follower: %+v", q)
	}
	// A consistent read goes to the leader, which verifies its leadership.
	for _, q := range []string{"?consistent", "?stale=false", "?consistent=true"} {
		leader.resetQuery()
		resp, _ := doReq(t, "GET", fts.URL+"/v1/jobs"+q, "")
		if _, _, lq := leader.seen(); resp.StatusCode != 200 || lq == nil {
			t.Fatalf("consistent read %s: %d, leader saw %+v", q, resp.StatusCode, lq)
		}
	}
	if n := leader.verifyCount(); n != 3 {
		t.Fatalf("leader verified leadership %d times, want 3", n)
	}
	// A leader that cannot confirm its quorum refuses a consistent read.
	leader.cmu.Lock()
	leader.verifyErr = fmt.Errorf("verify: %w", structs.ErrNotLeader)
	leader.cmu.Unlock()
	if resp, body := doReq(t, "GET", lts.URL+"/v1/job/hello-gpu?consistent", ""); resp.StatusCode != 503 {
		t.Fatalf("consistent read on a deposed leader: %d %s", resp.StatusCode, body)
	}
	// Reads that may be stale never verify.
	before := leader.verifyCount()
	doReq(t, "GET", lts.URL+"/v1/jobs?stale=true", "")
	if leader.verifyCount() != before {
		t.Fatal("a stale read verified leadership")
	}
}

func TestForward_Refusals(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	deadAddr := hostOf(closed)
	closed.Close()

	// Two followers that each think the other leads: one hop, then 503.
	a, b := newFakeCluster(false), newFakeCluster(false)
	ats, bts := serve(t, a), serve(t, b)
	a.leaderHTTP, b.leaderHTTP = hostOf(bts), hostOf(ats)

	noLeader := newFakeCluster(false)
	nts := serve(t, noLeader)
	unreachable := newFakeCluster(false)
	unreachable.leaderHTTP = deadAddr
	uts := serve(t, unreachable)

	cases := []struct {
		name string
		url  string
		want string
	}{
		{"forwarding loop", ats.URL + "/v1/jobs", "not the leader"},
		{"no leader", nts.URL + "/v1/jobs", "no cluster leader"},
		{"leader unreachable", uts.URL + "/v1/jobs", "forward to the leader"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := doReq(t, "PUT", tc.url, jobBody)
			if resp.StatusCode != 503 || !strings.Contains(body, tc.want) {
				t.Fatalf("got %d %s, want 503 with %q", resp.StatusCode, body, tc.want)
			}
		})
	}
	if ja, _, _ := a.seen(); ja != nil {
		t.Fatal("a follower applied a write")
	}
	if jb, _, _ := b.seen(); jb != nil {
		t.Fatal("a follower applied a write")
	}
}

func TestClusterRoutes(t *testing.T) {
	cases := []struct {
		name     string
		method   string
		path     string
		body     string
		setup    func(f *fakeCluster)
		wantCode int
		want     string
		check    func(t *testing.T, f *fakeCluster)
	}{
		{name: "raft configuration", method: "GET", path: "/v1/operator/raft/configuration", wantCode: 200, want: `"Address": "10.0.0.1:4657"`},
		{name: "remove peer by id", method: "DELETE", path: "/v1/operator/raft/peer?id=b", wantCode: 200,
			check: func(t *testing.T, f *fakeCluster) {
				if f.removed != "b" {
					t.Errorf("removed %q", f.removed)
				}
			}},
		{name: "remove peer by address", method: "DELETE", path: "/v1/operator/raft/peer?address=10.0.0.2:4657", wantCode: 200,
			check: func(t *testing.T, f *fakeCluster) {
				if f.removed != "10.0.0.2:4657" {
					t.Errorf("removed %q", f.removed)
				}
			}},
		{name: "remove peer without target", method: "DELETE", path: "/v1/operator/raft/peer", wantCode: 400, want: "give an id or address"},
		{name: "remove peer both", method: "DELETE", path: "/v1/operator/raft/peer?id=b&address=x:1", wantCode: 400, want: "not both"},
		{name: "remove unknown peer", method: "DELETE", path: "/v1/operator/raft/peer?id=zz", wantCode: 404,
			setup: func(f *fakeCluster) { f.removeErr = fmt.Errorf("raft peer zz: %w", structs.ErrNotFound) }},
		{name: "snapshot save", method: "GET", path: "/v1/operator/snapshot", wantCode: 200, want: "GPULBKUP-archive-bytes"},
		{name: "snapshot save error", method: "GET", path: "/v1/operator/snapshot", wantCode: 503, want: "not the leader",
			setup: func(f *fakeCluster) { f.saveErr = fmt.Errorf("snapshot: %w", structs.ErrNotLeader) }},
		{name: "snapshot restore", method: "PUT", path: "/v1/operator/snapshot", body: "GPULBKUP-restore", wantCode: 200,
			check: func(t *testing.T, f *fakeCluster) {
				if string(f.restored) != "GPULBKUP-restore" {
					t.Errorf("restored %q", f.restored)
				}
			}},
		{name: "snapshot restore garbage", method: "PUT", path: "/v1/operator/snapshot", body: "garbage", wantCode: 400, want: "bad snapshot archive"},
		{name: "members", method: "GET", path: "/v1/agent/members", wantCode: 200, want: `"RaftAddr": "10.0.0.1:4657"`},
		{name: "join", method: "PUT", path: "/v1/agent/join?address=10.0.0.2&address=10.0.0.3:4658", wantCode: 200, want: `"num_joined": 2`,
			check: func(t *testing.T, f *fakeCluster) {
				if len(f.joined) != 2 {
					t.Errorf("joined %v", f.joined)
				}
			}},
		{name: "join without address", method: "PUT", path: "/v1/agent/join", wantCode: 400, want: "at least one address"},
		{name: "join without gossip", method: "PUT", path: "/v1/agent/join?address=x", wantCode: 400, want: "gossip is not enabled",
			setup: func(f *fakeCluster) {
				f.joinErr = fmt.Errorf("join: %w: %w", structs.ErrInvalid, server.ErrNoGossip)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(true)
			if tc.setup != nil {
				tc.setup(f)
			}
			ts := serve(t, f)
			resp, body := doReq(t, tc.method, ts.URL+tc.path, tc.body)
			if resp.StatusCode != tc.wantCode || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s: got %d %s, want %d with %q", tc.method, tc.path, resp.StatusCode, body, tc.wantCode, tc.want)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

func TestClusterRoutes_AbsentWithoutClusterServer(t *testing.T) {
	ts := serve(t, newFakeServer())
	resp, _ := doReq(t, "GET", ts.URL+"/v1/operator/raft/configuration", "")
	if resp.StatusCode != 404 {
		t.Fatalf("got %d, want 404 on a server without cluster support", resp.StatusCode)
	}
	resp, body := doReq(t, "PUT", ts.URL+"/v1/jobs", jobBody)
	if resp.StatusCode != 200 || !strings.Contains(body, "EvalID") {
		t.Fatalf("plain server write: %d %s", resp.StatusCode, body)
	}
}

// *server.Server serves the HA routes.
var _ ClusterServer = (*server.Server)(nil)

// TestForward_EveryWriteRouteIsLeaderRouted fails when a route that changes
// state is registered without being listed in leaderRoutes (a follower
// would then run it locally and fail with 503 instead of forwarding).
// Routes that act on this agent or a client node, not on Raft state, are
// listed as local.
func TestForward_EveryWriteRouteIsLeaderRouted(t *testing.T) {
	local := map[string]bool{
		"POST /v1/jobs/parse":                     true, // parses only
		"PUT /v1/job/{id}/plan":                   true, // dry run on local state
		"POST /v1/job/{id}/plan":                  true,
		"PUT /v1/agent/join":                      true, // this server's gossip
		"POST /v1/allocation/{id}/signal":         true, // proxied to the alloc's node
		"POST /v1/allocation/{id}/restart":        true,
		"POST /v1/allocation/{id}/exec":           true,
		"POST /v1/client/allocation/{id}/restart": true,
		"PUT /v1/jobs/parse":                      true, // Nomad's method of parse
		"PUT /v1/client/allocation/{id}/restart":  true, // Nomad's paths of the actions
		"PUT /v1/client/allocation/{id}/signal":   true,
		"PUT /v1/search":                          true, // reads
		"POST /v1/search":                         true,
	}
	hh, err := New(Config{Server: newFakeCluster(true), Client: &fakeClient{}})
	if err != nil {
		t.Fatal(err)
	}
	h := hh.(*handler)
	checked := 0
	for _, method := range []string{"PUT", "POST", "DELETE"} {
		for _, path := range []string{
			"/v1/jobs", "/v1/jobs/parse", "/v1/job/x", "/v1/job/x/plan", "/v1/node/register", "/v1/node/x/heartbeat",
			"/v1/node/x/allocations", "/v1/node/x/drain", "/v1/node/x/eligibility", "/v1/allocation/x/stop",
			"/v1/allocation/x/signal", "/v1/allocation/x/restart", "/v1/allocation/x/exec", "/v1/operator/raft/peer",
			"/v1/operator/snapshot", "/v1/agent/join", "/v1/client/allocation/x/restart", "/v1/system/gc",
			"/v1/client/allocation/x/signal", "/v1/search",
		} {
			_, pattern := h.mux.Handler(httptest.NewRequest(method, path, nil))
			if pattern == "" || local[pattern] {
				continue
			}
			checked++
			if !leaderRoutes[pattern] {
				t.Errorf("write route %q is not forwarded to the leader", pattern)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d write routes checked; the route table changed shape", checked)
	}
}
