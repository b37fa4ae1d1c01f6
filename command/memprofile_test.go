package command

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteMemProfile: the SIGUSR2 dump holds the runtime's memory figures
// and a heap profile pprof can parse.
func TestWriteMemProfile(t *testing.T) {
	dir := t.TempDir()
	if err := writeMemProfile(dir, 1); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "mem-1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"/gc/heap/live:bytes ", "/gc/heap/goal:bytes ", "/memory/classes/heap/stacks:bytes "} {
		if !strings.Contains(string(raw), name) {
			t.Errorf("mem-1.txt has no %s:\n%s", name, raw)
		}
	}
	f, err := os.Open(filepath.Join(dir, "heap-1.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A pprof profile is a gzipped protobuf: it must decompress to some bytes.
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("heap-1.pprof: %v", err)
	}
	body, err := io.ReadAll(zr)
	if err != nil || len(body) == 0 {
		t.Fatalf("heap-1.pprof: %d bytes, %v", len(body), err)
	}
}
