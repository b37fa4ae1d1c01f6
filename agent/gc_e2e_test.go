package agent_test

import (
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestE2ESystemGCRemovesPurgedJobAlloc runs a batch job on the real
// binary, purges it (its finished allocation lingers in the API), runs
// `gpulayer system gc`, and checks that the allocation is gone from the API
// and its directory from the client's data dir.
func TestE2ESystemGCRemovesPurgedJobAlloc(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	dataDir := t.TempDir()
	a := startDevAgent(t, dataDir)

	out, code := a.cli("job", "run", "examples/hello-gpu.hcl")
	if code != 0 {
		t.Fatalf("job run exited %d:\n%s\nagent log:\n%s", code, out, a.logText())
	}
	alloc := a.waitAllocStatus("hello-gpu", structs.AllocClientStatusComplete, structs.AllocClientStatusFailed)
	allocDir := filepath.Join(dataDir, "client", "allocs", alloc.ID)
	if _, err := os.Stat(allocDir); err != nil {
		t.Fatalf("alloc dir of the finished allocation: %v", err)
	}

	out, code = a.cli("job", "stop", "-purge", "hello-gpu")
	if code != 0 {
		t.Fatalf("job stop -purge exited %d:\n%s", code, out)
	}
	if code := a.getJSON("/v1/allocation/"+alloc.ID, nil); code != 200 {
		t.Fatalf("before gc the purged job's allocation answers %d, want 200 (it lingers)", code)
	}

	out, code = a.cli("system", "gc")
	if code != 0 || !strings.Contains(out, "Garbage collected") {
		t.Fatalf("system gc exited %d:\n%s\nagent log:\n%s", code, out, a.logText())
	}
	waittest.For(t, 30*time.Second, "the allocation to leave /v1/allocations", func() (bool, string) {
		var allocs []*api.Allocation
		if code := a.getJSON("/v1/allocations", &allocs); code != 200 {
			return false, fmt.Sprintf("status %d", code)
		}
		for _, al := range allocs {
			if al.ID == alloc.ID {
				return false, "still listed: " + out
			}
		}
		return true, ""
	})
	if code := a.getJSON("/v1/allocation/"+alloc.ID, nil); code != 404 {
		t.Errorf("GET the collected allocation: %d, want 404", code)
	}
	waittest.For(t, 30*time.Second, "the client to remove the alloc dir", func() (bool, string) {
		_, err := os.Stat(allocDir)
		return os.IsNotExist(err), fmt.Sprintf("stat: %v", err)
	})
}
