package http

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// SystemGC makes the fake a GCServer: it answers fixed counts, or the
// error set for "SystemGC".
func (f *fakeServer) SystemGC(ctx context.Context) (*server.GCResult, error) {
	if err := f.call("SystemGC", nil); err != nil {
		return nil, err
	}
	return &server.GCResult{Evals: 3, Allocs: 2, Jobs: 1}, nil
}

func TestSystemGC(t *testing.T) {
	cases := []struct {
		name       string
		method     string
		err        error
		wantStatus int
		want       *server.GCResult
	}{
		{name: "put collects", method: "PUT", wantStatus: 200, want: &server.GCResult{Evals: 3, Allocs: 2, Jobs: 1}},
		{name: "post collects", method: "POST", wantStatus: 200, want: &server.GCResult{Evals: 3, Allocs: 2, Jobs: 1}},
		{name: "get is not allowed", method: "GET", wantStatus: 405},
		{name: "no leader", method: "PUT", err: fmt.Errorf("gc: %w", structs.ErrNoLeader), wantStatus: 503},
		{name: "not the leader", method: "PUT", err: fmt.Errorf("gc: %w", structs.ErrNotLeader), wantStatus: 503},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer()
			if c.err != nil {
				f.errs["SystemGC"] = c.err
			}
			ts := serve(t, f)
			resp, body := doReq(t, c.method, ts.URL+"/v1/system/gc", "")
			if resp.StatusCode != c.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.wantStatus, body)
			}
			if c.want == nil {
				return
			}
			var got server.GCResult
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("decode %q: %v", body, err)
			}
			if got != *c.want {
				t.Fatalf("body %+v, want %+v", got, *c.want)
			}
		})
	}
}

// TestSystemGCForwarded checks that PUT and POST /v1/system/gc on a
// follower run on the leader.
func TestSystemGCForwarded(t *testing.T) {
	leader := newFakeCluster(true)
	lts := serve(t, leader)
	follower := newFakeCluster(false)
	follower.leaderHTTP = hostOf(lts)
	follower.errs["SystemGC"] = fmt.Errorf("the follower ran it: %w", structs.ErrInvalid)
	fts := serve(t, follower)
	for _, method := range []string{"PUT", "POST"} {
		t.Run(method, func(t *testing.T) {
			resp, body := doReq(t, method, fts.URL+"/v1/system/gc", "")
			if resp.StatusCode != 200 {
				t.Fatalf("forwarded system gc: %d %s", resp.StatusCode, body)
			}
			var got server.GCResult
			if err := json.Unmarshal([]byte(body), &got); err != nil || got.Jobs != 1 {
				t.Fatalf("body %q (%v): want the leader's counts", body, err)
			}
		})
	}
}
