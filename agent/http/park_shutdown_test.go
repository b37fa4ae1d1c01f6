package http

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestParkerResumedConnDoesNotHoldShutdown: a connection handed back to
// the http.Server after its parked query answered is, to the server, a
// new connection that has not sent a request (StateNew), which
// http.Server.Shutdown waits up to 5 s for; a client that keeps it open
// without asking again (its agent stopping) held the agent's 5 s shutdown
// to its deadline ("shutdown acl-srv: http: context deadline exceeded" in
// a loaded make test). Shutdown closes such connections.
func TestParkerResumedConnDoesNotHoldShutdown(t *testing.T) {
	pns, _, base, srv := parkServer(t, 100*time.Millisecond)
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: 30 * time.Second}
	resp, body, _ := getReused(t, c, base+"/v1/node/node-1/client-allocs?index=3&wait=1s")
	if resp.StatusCode != 200 || pns.waits.Load() != 1 {
		t.Fatalf("parked query: %d %s, waits %d", resp.StatusCode, body, pns.waits.Load())
	}
	// The client keeps the connection idle; the server shuts down.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a resumed connection open: %v", err)
	}
}
