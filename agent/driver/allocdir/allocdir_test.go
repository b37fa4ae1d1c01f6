package allocdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// setup returns an allocation directory with a task log directory in it,
// that directory opened as a root, and a host file outside.
func setup(t *testing.T) (alloc string, logs *os.Root, host string) {
	t.Helper()
	alloc = t.TempDir()
	if err := MkdirAll(alloc, "main/logs", 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRoot(alloc, "main/logs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	host = filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(host, []byte("SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return alloc, r, host
}

func hostUnchanged(t *testing.T, host string) {
	t.Helper()
	if b, err := os.ReadFile(host); err != nil || string(b) != "SECRET\n" {
		t.Fatalf("host file changed: %q %v", b, err)
	}
}

func TestRefusesPlantedFiles(t *testing.T) {
	alloc, r, host := setup(t)
	logs := filepath.Join(alloc, "main", "logs")
	if err := os.Symlink(host, filepath.Join(logs, "sym")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../main/logs/own", filepath.Join(logs, "insym")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logs, "own"), []byte("own\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(host, filepath.Join(logs, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(logs, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sym", "insym", "hard", "fifo"} {
		done := make(chan error, 1)
		go func() {
			_, err := ReadFile(r, name, 1<<20)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrUnsafe) {
				t.Errorf("read %s: %v, want ErrUnsafe", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("read %s blocked", name)
		}
		if _, err := OpenAppend(r, name); !errors.Is(err, ErrUnsafe) {
			t.Errorf("append %s: %v, want ErrUnsafe", name, err)
		}
	}
	if b, err := ReadFile(r, "own", 1<<20); err != nil || string(b) != "own\n" {
		t.Fatalf("own file: %q %v", b, err)
	}
	// Writers replace the planted names with fresh files.
	for _, name := range []string{"sym", "hard", "fifo"} {
		f, fresh, err := OpenOrCreateAppend(r, name, 0o600)
		if err != nil || !fresh {
			t.Fatalf("create %s afresh: fresh=%v %v", name, fresh, err)
		}
		if _, err := f.WriteString("log\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := os.Symlink(host, filepath.Join(logs, "state")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(logs, "state.tmp")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(r, "state", []byte("{}"), 0o600, true); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(r, "state", 10); err != nil || string(b) != "{}" {
		t.Fatalf("state: %q %v", b, err)
	}
	if _, err := ReadFile(r, "state", 1); err == nil {
		t.Fatal("a file over the limit was read")
	}
	hostUnchanged(t, host)
}

func TestDirectorySymlinksStayInside(t *testing.T) {
	alloc, _, host := setup(t)
	hostDir := filepath.Dir(host)
	// The task replaced its log directory with a link out.
	if err := os.Rename(filepath.Join(alloc, "main", "logs"), filepath.Join(alloc, "main", "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostDir, filepath.Join(alloc, "main", "logs")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRoot(alloc, "main/logs"); err == nil {
		t.Fatal("opened a log directory that leads out of the allocation directory")
	}
	if err := MkdirAll(alloc, "main/logs/sub", 0o700); err == nil {
		t.Fatal("created a directory through a link out")
	}
	if _, err := os.Stat(filepath.Join(hostDir, "sub")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("directory made in the host directory: %v", err)
	}
	if _, err := OpenBeneath(alloc, filepath.Join(alloc, "..", "x")); err == nil {
		t.Fatal("a path outside the allocation directory was opened")
	}
}
