package allocdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpenDirFollowsNoLink: OpenDir opens real directories only, refusing
// a symlink even when it stays beneath the allocation directory (os.Root
// follows those), a hard link to a file, a FIFO and a ".." component.
func TestOpenDirFollowsNoLink(t *testing.T) {
	alloc := t.TempDir()
	host := t.TempDir()
	hostFile := filepath.Join(host, "f")
	if err := os.WriteFile(hostFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"t/local", "other/secrets"} {
		if err := os.MkdirAll(filepath.Join(alloc, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("../other/secrets", filepath.Join(alloc, "t/secrets")))
	must(os.Symlink("..", filepath.Join(alloc, "t/up")))
	must(os.Symlink(host, filepath.Join(alloc, "t/out")))
	must(os.Link(hostFile, filepath.Join(alloc, "t/hard")))
	must(syscall.Mkfifo(filepath.Join(alloc, "t/fifo"), 0o600))
	must(os.Symlink(filepath.Join(alloc, "t"), filepath.Join(alloc, "tl")))

	for _, rel := range []string{"", ".", "t", "t/local", "other/secrets"} {
		f, err := OpenDir(alloc, rel)
		if err != nil {
			t.Fatalf("OpenDir(%q): %v", rel, err)
		}
		f.Close()
	}
	for _, rel := range []string{"t/secrets", "t/up", "t/out", "t/hard", "t/fifo", "tl/local", "t/hard/x"} {
		if _, err := OpenDir(alloc, rel); !errors.Is(err, ErrUnsafe) {
			t.Errorf("OpenDir(%q) = %v, want ErrUnsafe", rel, err)
		}
	}
	if _, err := OpenDir(alloc, "t/../other"); err == nil || !strings.Contains(err.Error(), `".."`) {
		t.Errorf("a .. component: %v", err)
	}
	if _, err := OpenDir(alloc, "t/none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory: %v", err)
	}
	if err := ChmodDir(alloc, "t/out", 0o777); !errors.Is(err, ErrUnsafe) {
		t.Errorf("ChmodDir through a symlink: %v", err)
	}
	if err := ChmodDir(alloc, "t/local", 0o750); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(alloc, "t/local")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("ChmodDir: %v %v", fi, err)
	}
	if fi, err := os.Stat(host); err != nil || fi.Mode().Perm() == 0o777 {
		t.Fatalf("the host directory changed: %v %v", fi, err)
	}
}
