package artifacttar

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func tree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "b", "c"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "b", "run.sh"), []byte("#!/bin/sh\n"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "b", "c", "z"), bytes.Repeat([]byte("z"), 5000), 0o640))
	return dir
}

// TestPackDeterministic: the same tree packed twice, with other mtimes and
// modes on disk, gives the same bytes; entries are sorted with fixed
// modes, mtime 0 and uid/gid 0.
func TestPackDeterministic(t *testing.T) {
	dir := tree(t)
	var a, b bytes.Buffer
	if err := Pack(dir, &a); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "a.txt"), later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "a.txt"), 0o664); err != nil {
		t.Fatal(err)
	}
	if err := Pack(dir, &b); err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(a.Bytes()) != sha256.Sum256(b.Bytes()) {
		t.Fatal("two packs of the same tree differ")
	}
	tr := tar.NewReader(&a)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" {
			t.Fatalf("%s: mtime %v uid %d gid %d uname %q", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname)
		}
		want := int64(0o644)
		if h.Typeflag == tar.TypeDir || h.Name == "b/run.sh" {
			want = 0o755
		}
		if h.Mode != want {
			t.Fatalf("%s: mode %o, want %o", h.Name, h.Mode, want)
		}
	}
	want := []string{"a.txt", "b/", "b/c/", "b/c/z", "b/run.sh"}
	if len(names) != len(want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("entries %v, want %v", names, want)
		}
	}
}

// TestPackRefusesLinksAndSpecialFiles: a symlink (in or out of the tree)
// and a named pipe are refused with ErrUnsupported.
func TestPackRefusesLinksAndSpecialFiles(t *testing.T) {
	for name, mk := range map[string]func(dir string) error{
		"symlink out": func(dir string) error { return os.Symlink("/etc/passwd", filepath.Join(dir, "l")) },
		"symlink in":  func(dir string) error { return os.Symlink("a.txt", filepath.Join(dir, "l")) },
		"fifo":        func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "p"), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := tree(t)
			if err := mk(dir); err != nil {
				t.Skip(err)
			}
			err := Pack(dir, io.Discard)
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Pack = %v, want ErrUnsupported", err)
			}
		})
	}
}
