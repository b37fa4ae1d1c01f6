package client

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/structs"
)

// outageServer is the test server behind a switch: while down, every
// call fails as one to an unreachable server does.
type outageServer struct {
	*clienttest.Server
	down atomic.Bool
}

var errUnreachable = errors.New("dial tcp 127.0.0.1:4646: connect: connection refused")

func (s *outageServer) NodeRegister(ctx context.Context, n *structs.Node) (time.Duration, error) {
	if s.down.Load() {
		return 0, errUnreachable
	}
	return s.Server.NodeRegister(ctx, n)
}

func (s *outageServer) NodeUpdateStatus(ctx context.Context, id, st string) (time.Duration, error) {
	if s.down.Load() {
		return 0, errUnreachable
	}
	return s.Server.NodeUpdateStatus(ctx, id, st)
}

func (s *outageServer) NodeHeartbeatGPUs(ctx context.Context, id, st string, g []*structs.GPUUsage) (time.Duration, error) {
	if s.down.Load() {
		return 0, errUnreachable
	}
	return s.Server.NodeHeartbeatGPUs(ctx, id, st, g)
}

func (s *outageServer) NodeAllocations(ctx context.Context, id string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	if s.down.Load() {
		return nil, structs.QueryMeta{}, errUnreachable
	}
	return s.Server.NodeAllocations(ctx, id, q)
}

func (s *outageServer) UpdateAllocs(ctx context.Context, allocs []*structs.Allocation) error {
	if s.down.Load() {
		return errUnreachable
	}
	return s.Server.UpdateAllocs(ctx, allocs)
}

// TestClientFirstStartWithoutServers: a client started with no server
// reachable still starts (NewClient returns after RegisterTimeout instead
// of failing) and registers once a server answers.
func TestClientFirstStartWithoutServers(t *testing.T) {
	srv := &outageServer{Server: clienttest.NewServer()}
	srv.down.Store(true)
	c := newTestClient(t, srv.Server, t.TempDir(), func(cfg *Config) { cfg.Servers, cfg.RegisterTimeout = srv, 300*time.Millisecond })
	if n := srv.Node(c.Node().ID); n != nil {
		t.Fatal("node registered while the server was down")
	}
	srv.down.Store(false)
	clienttest.WaitFor(t, 30*time.Second, func() (bool, string) {
		return srv.Node(c.Node().ID) != nil, "node not registered after the server came up"
	})
	// The alloc watch runs once registered: an allocation placed now runs.
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "exec sleep 60"}, nil)
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 30*time.Second, running)
}

// TestClientRestoresAllocsWithoutServers: a client restarted while every
// server is down runs its allocations again from its local state, before
// any server answers; once one does, the allocation's status reaches it
// and the allocation keeps running, not started a third time.
func TestClientRestoresAllocsWithoutServers(t *testing.T) {
	srv := &outageServer{Server: clienttest.NewServer()}
	dir := t.TempDir()
	c1 := newTestClient(t, srv.Server, dir, func(cfg *Config) { cfg.Servers = srv })
	svc := clienttest.NativeAlloc(c1.Node().ID, structs.JobTypeService, "/bin/sh", []string{"-c", "echo run >> $GPULAYER_ALLOC_DIR/runs; exec sleep 60"}, nil)
	srv.UpsertAlloc(svc)
	srv.WaitForAlloc(t, svc.ID, 15*time.Second, running)
	clienttest.WaitFor(t, 15*time.Second, func() (bool, string) {
		n := countRuns(t, c1, svc.ID)
		return n == 1, fmt.Sprintf("service ran %d times in the first life", n)
	})
	srv.down.Store(true)
	if err := c1.Shutdown(); err != nil {
		t.Fatal(err)
	}

	c2 := newTestClient(t, srv.Server, dir, func(cfg *Config) { cfg.Servers, cfg.RegisterTimeout = srv, 300*time.Millisecond })
	clienttest.WaitFor(t, 30*time.Second, func() (bool, string) {
		n := countRuns(t, c2, svc.ID)
		return n == 2, fmt.Sprintf("service ran %d times with the servers down", n)
	})
	if c2.NumAllocs() != 1 {
		t.Fatalf("NumAllocs = %d, want 1", c2.NumAllocs())
	}
	_, _, updatesBefore := srv.Counts()
	srv.down.Store(false)
	got := srv.WaitForAlloc(t, svc.ID, 30*time.Second, func(a *structs.Allocation) bool {
		_, _, u := srv.Counts()
		return u > updatesBefore && a.ClientStatus == structs.AllocClientStatusRunning
	})
	if got.ClientStatus != structs.AllocClientStatusRunning {
		t.Fatalf("status after reconnect %q", got.ClientStatus)
	}
	clienttest.WaitFor(t, 30*time.Second, func() (bool, string) {
		return srv.Node(c2.Node().ID) != nil, "node not registered again"
	})
	if n := countRuns(t, c2, svc.ID); n != 2 {
		t.Fatalf("service ran %d times after the server came back, want 2", n)
	}
}
