package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/artifacts"
	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

// heldStore is an artifact store whose uploads wait until release is
// closed.
type heldStore struct {
	artifacts.Store
	release chan struct{}
}

func (s heldStore) Put(ctx context.Context, hex string, r io.Reader, size int64, mediaType, jobID, allocID string) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Put(ctx, hex, r, size, mediaType, jobID, allocID)
}

// The final status of a finished batch allocation is reported without
// waiting for its log archive's upload; the digest follows once the
// upload is done, and the archive holds the task's stdout.
func TestLogArchiveAfterCompleteReport(t *testing.T) {
	srv := clienttest.NewServer()
	release := make(chan struct{})
	c := newTestClient(t, srv, "", func(cfg *Config) {
		cfg.Artifacts = heldStore{Store: nodeArtifactStore{conn: srv, nodeID: ""}, release: release}
	})
	a := clienttest.NativeAlloc(c.nodeID(), structs.JobTypeBatch, "/bin/sh", []string{"-c", "echo archived-later"}, nil)
	srv.UpsertAlloc(a)
	got := srv.WaitForAlloc(t, a.ID, 20*time.Second, func(x *structs.Allocation) bool {
		return x.ClientStatus == structs.AllocClientStatusComplete
	})
	if got.LogArchive != "" {
		t.Fatalf("log archive %q recorded while its upload is held", got.LogArchive)
	}
	// The local record follows the complete report (it is written once
	// the driver task is destroyed): wait for it, the upload still held.
	waitRecord(t, c, a.ID, func(r *allocRecord) bool { return r != nil && r.LogsPending && r.JobID == a.JobID })
	close(release)
	got = srv.WaitForAlloc(t, a.ID, 20*time.Second, func(x *structs.Allocation) bool { return x.LogArchive != "" })
	if got.ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("status with the archive: %s", got.ClientStatus)
	}
	checkArchivedStdout(t, srv, got.LogArchive, "archived-later")
	waitRecord(t, c, a.ID, func(r *allocRecord) bool { return r != nil && !r.LogsPending })
}

// A client that stopped after reporting an allocation finished but before
// uploading its log archive uploads it when it starts again, reports the
// digest and clears the pending mark.
func TestLogArchivePendingResumedAfterRestart(t *testing.T) {
	srv := clienttest.NewServer()
	dataDir := t.TempDir()
	c1 := newTestClient(t, srv, dataDir, nil)
	nodeID := c1.nodeID()
	if err := c1.Shutdown(); err != nil {
		t.Fatal(err)
	}
	a := clienttest.NativeAlloc(nodeID, structs.JobTypeBatch, "/bin/true", nil, nil)
	a.ClientStatus = structs.AllocClientStatusComplete
	srv.UpsertAlloc(a)
	logs := filepath.Join(dataDir, "allocs", a.ID, "main", "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logs, "main.stdout.0"), []byte("left-pending\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := openState(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &allocRecord{ClientStatus: structs.AllocClientStatusComplete, JobID: a.JobID, LogsPending: true,
		TaskStates: map[string]*structs.TaskState{"main": {State: structs.TaskStateDead}}}
	if err := st.finishAlloc(a.ID, rec); err != nil {
		t.Fatal(err)
	}
	st.close()

	c2 := newTestClient(t, srv, dataDir, nil)
	got := srv.WaitForAlloc(t, a.ID, 20*time.Second, func(x *structs.Allocation) bool { return x.LogArchive != "" })
	checkArchivedStdout(t, srv, got.LogArchive, "left-pending")
	waitRecord(t, c2, a.ID, func(r *allocRecord) bool { return r != nil && !r.LogsPending })
}

func checkArchivedStdout(t *testing.T, srv *clienttest.Server, digest, want string) {
	t.Helper()
	arch, ok := srv.Blobs().Blob(digest)
	if !ok {
		t.Fatalf("log archive %s not stored", digest)
	}
	var out bytes.Buffer
	if _, err := artifacts.ReadLogFromArchive(bytes.NewReader(arch), "main", "main.stdout.0", &out); err != nil || !strings.Contains(out.String(), want) {
		t.Fatalf("archived stdout %q %v", out.String(), err)
	}
}

func waitRecord(t *testing.T, c *Client, allocID string, ok func(*allocRecord) bool) {
	t.Helper()
	waittest.For(t, 10*time.Second, "the state record of "+allocID, func() (bool, string) {
		recs, err := c.state.terminal()
		if err != nil {
			return false, err.Error()
		}
		return ok(recs[allocID]), fmt.Sprintf("%+v", recs[allocID])
	})
}
