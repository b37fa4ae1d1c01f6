package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// stalledServer holds every client-allocs long poll until the request
// ends and answers every other call 503, as a server stopped or cut off
// from the leader would.
func stalledServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var polls atomic.Int64
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/client-allocs") {
			if r.URL.Query().Get("index") == "99" {
				// A poll this server fails at once.
				http.Error(w, `{"error":"no leader"}`, http.StatusServiceUnavailable)
				return
			}
			polls.Add(1)
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		http.Error(w, `{"error":"no leader"}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(func() { close(release); ts.Close() })
	return ts, &polls
}

// answeringServer answers client-allocs at once with index 7 and
// X-Gpulayer-KnownLeader set to knownLeader, and heartbeats with a TTL.
func answeringServer(t *testing.T, knownLeader string) (*httptest.Server, *atomic.Int64) {
	var polls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Gpulayer-Index", "7")
		w.Header().Set("X-Gpulayer-KnownLeader", knownLeader)
		if strings.HasSuffix(r.URL.Path, "/client-allocs") {
			polls.Add(1)
			_ = json.NewEncoder(w).Encode(structs.NodeClientAllocsHTTPResponse{Allocs: map[string]uint64{"a": 7}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"HeartbeatTTL": int64(10 * time.Second)})
	}))
	t.Cleanup(ts.Close)
	return ts, &polls
}

// TestHTTPServerConnFailedCallCutsLongPolls: a 5-minute allocation poll
// held by a server whose connection does not close (stopped, cut off) ends
// as soon as another call of the client fails on that server (its
// heartbeat), and is answered by the next server; another poll failing
// there does not cut it.
func TestHTTPServerConnFailedCallCutsLongPolls(t *testing.T) {
	stalled, stalledPolls := stalledServer(t)
	good, goodPolls := answeringServer(t, "true")
	conn, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: []string{stalled.URL, good.URL}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type answer struct {
		ids map[string]uint64
		err error
	}
	done := make(chan answer, 1)
	go func() {
		ids, _, err := conn.NodeClientAllocs(ctx, "n", &structs.QueryOptions{MinQueryIndex: 3, MaxQueryTime: AllocWatchWait, AllowStale: true})
		done <- answer{ids, err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for stalledPolls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the poll never reached the first server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Another poll failing on that server cuts nothing: polls cutting each
	// other on their own failures would never stop.
	if _, _, err := conn.NodeClientAllocs(ctx, "m", &structs.QueryOptions{MinQueryIndex: 99, MaxQueryTime: AllocWatchWait, AllowStale: true}); err != nil {
		t.Fatalf("failed poll, answered by the next server: %v", err)
	}
	select {
	case a := <-done:
		t.Fatalf("the poll returned when another poll failed: %+v", a)
	case <-time.After(100 * time.Millisecond):
	}
	// That poll moved the connection to the next server; the heartbeat
	// below must go to the stalled one first, as it would have.
	conn.mu.Lock()
	conn.current = 0
	conn.mu.Unlock()
	// The heartbeat fails on the stalled server (503) and goes on to the
	// next one; the poll must follow.
	if _, err := conn.NodeUpdateStatus(ctx, "n", structs.NodeStatusReady); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	select {
	case a := <-done:
		if a.err != nil || a.ids["a"] != 7 {
			t.Fatalf("cut poll: ids %v err %v, want the next server's answer", a.ids, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll was still held by the stalled server after its heartbeat failed there")
	}
	if goodPolls.Load() != 2 {
		t.Fatalf("next server got %d polls, want 2 (the failed one, the cut one)", goodPolls.Load())
	}
}

// TestHTTPServerConnLeaderlessAnswerMovesOn: a long poll answered by a
// server that knows no leader (its wait cut at a leader change) sends the
// next call to another server; an answer with a leader keeps the server.
func TestHTTPServerConnLeaderlessAnswerMovesOn(t *testing.T) {
	lost, lostPolls := answeringServer(t, "false")
	good, goodPolls := answeringServer(t, "true")
	conn, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: []string{lost.URL, good.URL}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := &structs.QueryOptions{MinQueryIndex: 3, MaxQueryTime: AllocWatchWait, AllowStale: true}
	for i := 0; i < 3; i++ {
		if _, _, err := conn.NodeClientAllocs(ctx, "n", q); err != nil {
			t.Fatal(err)
		}
	}
	if lostPolls.Load() != 1 || goodPolls.Load() != 2 {
		t.Fatalf("polls: leaderless server %d, server with a leader %d; want 1 and 2", lostPolls.Load(), goodPolls.Load())
	}
}
