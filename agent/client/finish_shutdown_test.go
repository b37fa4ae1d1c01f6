package client

import (
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// TestShutdownAfterEarlyReportNeverReruns: a batch allocation reported
// complete at its task's end (before the driver destroy and the local
// record) must not run again when the client shuts down during the destroy
// and restarts: the servers already took it as complete.
func TestShutdownAfterEarlyReportNeverReruns(t *testing.T) {
	drv := newHeldDestroy(t)
	srv := clienttest.NewServer()
	dir := t.TempDir()
	c1 := newTestClient(t, srv, dir, func(cfg *Config) { cfg.Drivers = []driver.Driver{drv} })
	a := clienttest.NativeAlloc(c1.Node().ID, structs.JobTypeBatch, "/bin/sh", []string{"-c", "echo run >> $GPULAYER_ALLOC_DIR/runs"}, nil)
	srv.UpsertAlloc(a)
	select {
	case <-drv.destroying:
	case <-time.After(30 * time.Second):
		close(drv.release)
		t.Fatal("the driver task was never destroyed")
	}
	srv.WaitForAlloc(t, a.ID, 30*time.Second, func(al *structs.Allocation) bool {
		return al.ClientStatus == structs.AllocClientStatusComplete
	})
	c1.mu.Lock()
	ar := c1.runners[a.ID]
	c1.mu.Unlock()
	shut := make(chan error, 1)
	go func() { shut <- c1.Shutdown() }()
	// The shutdown reaches the runner while the destroy is still held.
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		ar.mu.Lock()
		defer ar.mu.Unlock()
		return ar.quiet, "runner not told to shut down"
	})
	close(drv.release)
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if got := srv.Alloc(a.ID); got.ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("after shutdown the server sees %q, want complete", got.ClientStatus)
	}

	c2 := newTestClient(t, srv, dir, nil)
	// Give a rerun time to happen and be reported.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if got := srv.Alloc(a.ID); got.ClientStatus != structs.AllocClientStatusComplete {
			t.Fatalf("the server's complete allocation flipped to %q (%s) after the restart", got.ClientStatus, got.ClientDescription)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := countRuns(t, c2, a.ID); n != 1 {
		t.Fatalf("the allocation reported complete ran %d times", n)
	}
}
