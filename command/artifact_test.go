package command

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// failingEnd is a reader whose end is an error, as the verifying reader
// of a download that does not hash to its digest.
type failingEnd struct{ r io.Reader }

func (f failingEnd) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("artifact digest mismatch")
	}
	return n, err
}

// TestWriteVerifiedKeepsNothingOnMismatch: `artifact get` writes a
// download to DEST only when its reader ended cleanly; a mismatch leaves
// neither DEST nor a temporary file.
func TestWriteVerifiedKeepsNothingOnMismatch(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "out.bin")
	if _, err := writeVerified(failingEnd{bytes.NewReader([]byte("bad bytes"))}, dest); err == nil {
		t.Fatal("a failing download was kept")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	n, err := writeVerified(bytes.NewReader([]byte("good")), dest)
	if b, _ := os.ReadFile(dest); err != nil || n != 4 || string(b) != "good" {
		t.Fatalf("good download: %d %v %q", n, err, b)
	}
}
