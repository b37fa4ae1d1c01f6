package artifacts

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// FuzzPlaceTar feeds arbitrary bytes to the tar unpack: it may refuse
// them, but it never panics and never writes outside the task directory
// (the sibling file stays, no new entry appears beside the task dir).
func FuzzPlaceTar(f *testing.F) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "a/b.txt", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	tw.Write([]byte("hi"))
	tw.WriteHeader(&tar.Header{Name: "l", Linkname: "a/b.txt", Typeflag: tar.TypeSymlink})
	tw.WriteHeader(&tar.Header{Name: "../x", Mode: 0o644, Typeflag: tar.TypeReg})
	tw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "task")
		os.MkdirAll(filepath.Join(dir, "local"), 0o755)
		os.WriteFile(filepath.Join(parent, "sibling"), []byte("keep"), 0o600)
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		a := &structs.TaskArtifact{GetterSource: "artifact://sha256/" + strings.Repeat("a", 64), RelativeDest: "local/d", GetterMode: "dir"}
		_ = Place(root, a, bytes.NewReader(data), 1<<20)
		ents, _ := os.ReadDir(parent)
		if len(ents) != 2 {
			t.Fatalf("entries beside the task directory: %v", ents)
		}
		if b, _ := os.ReadFile(filepath.Join(parent, "sibling")); string(b) != "keep" {
			t.Fatal("sibling changed")
		}
	})
}
