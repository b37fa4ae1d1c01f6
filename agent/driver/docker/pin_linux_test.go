package docker

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestPinStagesSwept: a staging directory left by an agent that died
// between pinning and release is unmounted and removed by the next pin,
// without touching what it showed; a fresh one is left alone.
func TestPinStagesSwept(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	allocs := t.TempDir()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(allocs, stagePrefix+"old")
	fresh := filepath.Join(allocs, stagePrefix+"new")
	for _, d := range []string{filepath.Join(stale, "0"), filepath.Join(fresh, "0")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount(src, filepath.Join(stale, "0"), "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(filepath.Join(stale, "0"), syscall.MNT_DETACH) })
	old := time.Now().Add(-2 * staleStage)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	sweepStages(allocs)
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale staging directory still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("fresh staging directory removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(src, "keep")); err != nil {
		t.Fatalf("the mounted source lost its file: %v", err)
	}
}
