package http

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// stalledLeader is an HTTP server that accepts requests and answers none
// until the test ends (a leader stopped with SIGSTOP, or cut off).
func stalledLeader(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); ts.Close() })
	return ts
}

// followerOf serves a follower whose leader is at addr, forwarding with
// the base timeout given.
func followerOf(t *testing.T, addr string, timeout time.Duration) *httptest.Server {
	t.Helper()
	f := newFakeCluster(false)
	f.leaderHTTP = addr
	h, err := New(Config{Server: f})
	if err != nil {
		t.Fatal(err)
	}
	h.(*handler).fwd.timeout = timeout
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// TestExploitForwardToStalledLeaderTimesOut: a write a follower forwarded
// to a leader that accepted it and went silent answers within the forward
// timeout, with 504 "outcome unknown" (it may have been applied: read
// before retrying); a read answers 503. Neither waits for the leader.
func TestExploitForwardToStalledLeaderTimesOut(t *testing.T) {
	leader := stalledLeader(t)
	fts := followerOf(t, hostOf(leader), 300*time.Millisecond)

	start := time.Now()
	resp, body := doReq(t, "PUT", fts.URL+"/v1/jobs", jobBody)
	took := time.Since(start)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "outcome unknown") || !strings.Contains(body, "read before retrying") {
		t.Fatalf("forwarded write to a stalled leader: %d %s, want 504 outcome unknown", resp.StatusCode, body)
	}
	if took > 3*time.Second {
		t.Fatalf("forwarded write held %s by a stalled leader", took)
	}

	resp, body = doReq(t, "GET", fts.URL+"/v1/jobs", "")
	if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(body, "outcome unknown") {
		t.Fatalf("forwarded read to a stalled leader: %d %s, want 503", resp.StatusCode, body)
	}
}

// TestForwardToDeadLeaderIsNotApplied: a write that could not reach the
// leader at all was certainly not applied: 503, not "outcome unknown".
func TestForwardToDeadLeaderIsNotApplied(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	addr := hostOf(closed)
	closed.Close()
	fts := followerOf(t, addr, 300*time.Millisecond)
	resp, body := doReq(t, "PUT", fts.URL+"/v1/jobs", jobBody)
	if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(body, "outcome unknown") || !strings.Contains(body, "not applied") {
		t.Fatalf("forwarded write to a dead leader: %d %s, want 503 not applied", resp.StatusCode, body)
	}
}

// TestForwardedBlockingQueryMayWaitItsWait: a forwarded blocking query is
// not cut off by the base timeout; its ?wait bounds it.
func TestForwardedBlockingQueryMayWaitItsWait(t *testing.T) {
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(700 * time.Millisecond) // a blocking query waiting for a change
		w.Header().Set(headerIndex, "7")
		writeJSON(w, http.StatusOK, []string{})
	}))
	t.Cleanup(leader.Close)
	fts := followerOf(t, hostOf(leader), 200*time.Millisecond)
	resp, body := doReq(t, "GET", fts.URL+"/v1/jobs?index=5&wait=2s", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(headerIndex) != "7" {
		t.Fatalf("forwarded blocking query: %d %s", resp.StatusCode, body)
	}
	if got := forwardTimeout(httptest.NewRequest("GET", "/v1/jobs?index=5&wait=20m", nil), "GET /v1/jobs", time.Second); got != structs.MaxBlockingQueryWait+structs.MaxBlockingQueryWait/16+time.Second {
		t.Fatalf("timeout of a blocking query asking 20m: %s, want the 10m cap plus jitter and base", got)
	}
}

// TestExploitNotFoundFromBlockingQueryCarriesIndex: a 404 from a get route
// carries the index headers (X-Gpulayer-Index and X-Nomad-Index), so a
// client can block until the object appears.
func TestExploitNotFoundFromBlockingQueryCarriesIndex(t *testing.T) {
	srv := newFakeServer()
	srv.meta = structs.QueryMeta{Index: 42, KnownLeader: true}
	ts := serve(t, srv)
	for _, path := range []string{"/v1/job/nope", "/v1/allocation/nope", "/v1/evaluation/nope", "/v1/node/nope"} {
		resp, body := doReq(t, "GET", ts.URL+path+"?index=1&wait=1s", "")
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		if resp.Header.Get(headerIndex) != "42" || resp.Header.Get(headerNomadIndex) != "42" || resp.Header.Get(headerNomadKnownLeader) != "true" {
			t.Fatalf("%s: 404 without index headers: %v", path, resp.Header)
		}
	}
}

// TestNotReadyIs503: a server that has not caught up answers 503 with
// its reason.
func TestNotReadyIs503(t *testing.T) {
	srv := newFakeServer()
	srv.errs["JobList"] = structs.ErrNotReady
	ts := serve(t, srv)
	resp, body := doReq(t, "GET", ts.URL+"/v1/jobs?stale", "")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "not ready") {
		t.Fatalf("stale read on a server not caught up: %d %s", resp.StatusCode, body)
	}
}

// notReadyServer is a fake server whose state has not caught up.
type notReadyServer struct{ *fakeServer }

func (notReadyServer) Ready() error {
	return fmt.Errorf("%w: catching up with the leader: applied index 3 of 166", structs.ErrNotReady)
}

// TestExploitHealthSaysNotCaughtUp: a server that has not caught up since
// it started (restarted on a full disk, wiped and rejoining) is not healthy,
// though a leader is known.
func TestExploitHealthSaysNotCaughtUp(t *testing.T) {
	ts := serve(t, notReadyServer{newFakeServer()})
	resp, body := doReq(t, "GET", ts.URL+"/v1/status/health", "")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "applied index 3 of 166") {
		t.Fatalf("health of a server not caught up: %d %s", resp.StatusCode, body)
	}
}

// laggingFollower is a follower that last heard from its leader `last` ago.
type laggingFollower struct {
	*fakeCluster
	last time.Duration
}

func (f laggingFollower) LastContact() time.Duration { return f.last }

// TestStaleReadMaxStale: ?stale&max_stale=D is answered locally while the
// follower's last leader contact is within D, and by the leader otherwise.
func TestStaleReadMaxStale(t *testing.T) {
	leader := newFakeCluster(true)
	lts := serve(t, leader)
	for _, tc := range []struct {
		last       time.Duration
		wantLeader bool
	}{{100 * time.Millisecond, false}, {5 * time.Second, true}, {-1, true}} {
		f := newFakeCluster(false)
		f.leaderHTTP = hostOf(lts)
		fts := serve(t, laggingFollower{f, tc.last})
		leader.resetQuery()
		resp, body := doReq(t, "GET", fts.URL+"/v1/jobs?stale&max_stale=1s", "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("last contact %s: %d %s", tc.last, resp.StatusCode, body)
		}
		_, _, lq := leader.seen()
		_, _, fq := f.seen()
		if tc.wantLeader != (lq != nil) || tc.wantLeader == (fq != nil) {
			t.Fatalf("last contact %s, max_stale 1s: leader ran it %v, follower ran it %v", tc.last, lq != nil, fq != nil)
		}
	}
	resp, _ := doReq(t, "GET", lts.URL+"/v1/jobs?stale&max_stale=soon", "")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("invalid max_stale: %d, want 400", resp.StatusCode)
	}
}
