package client

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/structs"
)

// allocDirExists reports whether the allocation's directory is on disk.
func allocDirExists(t *testing.T, c *Client, allocID string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(c.cfg.DataDir, "allocs", allocID))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// recorded reports whether the client's state file holds a final status
// for the allocation.
func recorded(t *testing.T, c *Client, allocID string) bool {
	t.Helper()
	recs, err := c.state.terminal()
	if err != nil {
		t.Fatal(err)
	}
	return recs[allocID] != nil
}

// TestGarbageCollectedAllocIsRemoved removes allocations from the servers'
// list, as garbage collection does: one that finished here loses its
// runner, its state record and its directory; one still running is
// stopped and keeps its directory.
func TestGarbageCollectedAllocIsRemoved(t *testing.T) {
	cases := []struct {
		name    string
		typ     string
		script  string
		wait    func(a *structs.Allocation) bool
		wantDir bool
	}{
		{name: "finished batch allocation", typ: structs.JobTypeBatch, script: "echo done > $GPULAYER_ALLOC_DIR/out", wait: terminal},
		{name: "running service allocation", typ: structs.JobTypeService, script: "echo up > $GPULAYER_ALLOC_DIR/out; exec sleep 60", wait: running, wantDir: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := clienttest.NewServer()
			c := newTestClient(t, srv, "", nil)
			a := clienttest.NativeAlloc(c.Node().ID, tc.typ, "/bin/sh", []string{"-c", tc.script}, nil)
			srv.UpsertAlloc(a)
			srv.WaitForAlloc(t, a.ID, 15*time.Second, tc.wait)
			clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
				_, err := os.Stat(filepath.Join(c.cfg.DataDir, "allocs", a.ID, "out"))
				return err == nil, fmt.Sprintf("task output: %v", err)
			})
			srv.DeleteAlloc(a.ID)
			clienttest.WaitFor(t, 15*time.Second, func() (bool, string) {
				return c.NumAllocs() == 0, fmt.Sprintf("%d allocs held", c.NumAllocs())
			})
			if tc.wantDir {
				if !allocDirExists(t, c, a.ID) {
					t.Fatal("the directory of an allocation that was running was removed")
				}
				return
			}
			clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
				return !allocDirExists(t, c, a.ID), "alloc directory still there"
			})
			if recorded(t, c, a.ID) {
				t.Fatal("state record of the collected allocation still there")
			}
		})
	}
}

// TestGarbageCollectedWhileDown removes, at start, what an earlier life of
// the client kept of a finished allocation the servers collected since.
func TestGarbageCollectedWhileDown(t *testing.T) {
	srv := clienttest.NewServer()
	dataDir := t.TempDir()
	c := newTestClient(t, srv, dataDir, nil)
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeBatch, "/bin/sh", []string{"-c", "echo done"}, nil)
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 15*time.Second, terminal)
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) { return recorded(t, c, a.ID), "final status not recorded" })
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	srv.DeleteAlloc(a.ID)

	c2 := newTestClient(t, srv, dataDir, nil)
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		return !allocDirExists(t, c2, a.ID), "alloc directory still there"
	})
	if recorded(t, c2, a.ID) {
		t.Fatal("state record of the collected allocation still there")
	}
}
