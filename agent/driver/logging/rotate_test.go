package logging

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestExploitHardLinkInLogDir: a task hard-links a host file (same file
// system) into its log directory under the name of the newest log file.
// The writer continued that file after a restart, appending the task's
// output to the host file. Now a file with more than one link is never
// continued: the writer starts the next file.
func TestExploitHardLinkInLogDir(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(host, []byte("SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(host, filepath.Join(dir, "main.stdout.3")); err != nil {
		t.Fatal(err)
	}
	w, err := NewRotatingWriter(dir, "main.stdout", 1<<20, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("task output\n")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if b, _ := os.ReadFile(host); string(b) != "SECRET\n" {
		t.Fatalf("host file written through a hard link: %q", b)
	}
	b, err := os.ReadFile(filepath.Join(dir, "main.stdout.4"))
	if err != nil || string(b) != "task output\n" {
		t.Fatalf("next file %q %v, want the output", b, err)
	}
}

// TestRotationReplacesPlantedLinks: symlinks planted under the names of
// the next rotated files are replaced by the writer's own files.
func TestRotationReplacesPlantedLinks(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(host, []byte("SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := NewRotatingWriter(dir, "main.stdout", 16, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if err := os.Symlink(host, filepath.Join(dir, "main.stdout."+string(rune('0'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 6; i++ {
		if _, err := w.Write([]byte("0123456789abcde\n")); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if b, _ := os.ReadFile(host); string(b) != "SECRET\n" {
		t.Fatalf("host file written through a planted symlink: %q", b)
	}
	idx, err := Indexes(dir, "main.stdout")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range idx {
		p := filepath.Join(dir, "main.stdout."+string(rune('0'+i)))
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
			t.Fatalf("%s: %v %v", p, fi, err)
		}
		if b, _ := os.ReadFile(p); strings.Contains(string(b), "SECRET") {
			t.Fatalf("%s holds the host file", p)
		}
	}
}
