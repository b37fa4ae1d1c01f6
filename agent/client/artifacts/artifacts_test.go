package artifacts

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// memStore is a Store over a map that checks every upload's digest, as
// the servers do.
type memStore struct {
	mu    sync.Mutex
	blobs map[string][]byte
	puts  int
}

func newMemStore() *memStore { return &memStore{blobs: map[string][]byte{}} }

func (s *memStore) Missing(ctx context.Context, digests []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, d := range digests {
		if _, ok := s.blobs[d]; !ok {
			out = append(out, d)
		}
	}
	return out, nil
}

func (s *memStore) Put(ctx context.Context, hx string, r io.Reader, size int64, mt, job, alloc string) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if sum(b) != hx || int64(len(b)) != size {
		return fmt.Errorf("digest mismatch")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blobs[hx] = b
	s.puts++
	return nil
}

func (s *memStore) Get(ctx context.Context, hx string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[hx]
	if !ok {
		return nil, ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

type entry struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func mkTar(t *testing.T, es ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

// taskDir makes <tmp>/alloc/task/local and a sibling file outside the
// task directory that no unpack may touch.
func taskDir(t *testing.T) (allocDir, dir string, root *os.Root) {
	t.Helper()
	allocDir = filepath.Join(t.TempDir(), "alloc")
	dir = filepath.Join(allocDir, "task")
	if err := os.MkdirAll(filepath.Join(dir, "local"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return allocDir, dir, root
}

// snapshot lists every path under dir.
func snapshot(t *testing.T, dir string) []string {
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestExploitArtifactUnpackEscape: each tar that tries to write outside
// its destination, or to plant a device, FIFO or setuid file, is refused
// naming the entry, and neither the destination nor anything outside the
// task directory gains a file.
func TestExploitArtifactUnpackEscape(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		want    string
	}{
		{"dotdot", []entry{{name: "ok.txt", typ: tar.TypeReg, body: "ok"}, {name: "../x", typ: tar.TypeReg, body: "evil"}}, `entry "../x"`},
		{"deep dotdot", []entry{{name: "a/../../../x", typ: tar.TypeReg, body: "evil"}}, `".." element`},
		{"absolute", []entry{{name: "/tmp/evil", typ: tar.TypeReg, body: "evil"}}, "absolute path"},
		{"symlink out absolute", []entry{{name: "l", link: "/etc", typ: tar.TypeSymlink}, {name: "l/passwd", typ: tar.TypeReg, body: "evil"}}, `symlink to "/etc"`},
		{"symlink out relative", []entry{{name: "l", link: "../../..", typ: tar.TypeSymlink}}, `symlink to "../../.."`},
		{"hard link out", []entry{{name: "h", link: "../../secret", typ: tar.TypeLink}}, `hard link to "../../secret"`},
		{"hard link absolute", []entry{{name: "h", link: "/etc/shadow", typ: tar.TypeLink}}, `hard link to "/etc/shadow"`},
		{"char device", []entry{{name: "null", typ: tar.TypeChar}}, "device file"},
		{"block device", []entry{{name: "sda", typ: tar.TypeBlock}}, "device file"},
		{"fifo", []entry{{name: "p", typ: tar.TypeFifo}}, "FIFO"},
		{"setuid", []entry{{name: "sh", typ: tar.TypeReg, mode: 0o4755, body: "#!"}}, "setuid"},
		{"setgid dir", []entry{{name: "d", typ: tar.TypeDir, mode: 0o2755}}, "setgid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			allocDir, dir, root := taskDir(t)
			outside := filepath.Join(filepath.Dir(allocDir), "secret")
			os.WriteFile(outside, []byte("host"), 0o600)
			before := snapshot(t, filepath.Dir(allocDir))
			a := &structs.TaskArtifact{GetterSource: "artifact://sha256/" + strings.Repeat("a", 64), RelativeDest: "local/data", GetterMode: "dir"}
			err := Place(root, a, bytes.NewReader(mkTar(t, c.entries...)), 0)
			if !errors.Is(err, ErrUnsafeEntry) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrUnsafeEntry naming %q", err, c.want)
			}
			after := snapshot(t, filepath.Dir(allocDir))
			if strings.Join(before, "\n") != strings.Join(after, "\n") {
				t.Fatalf("files changed:\nbefore %v\nafter  %v", before, after)
			}
			if b, _ := os.ReadFile(outside); string(b) != "host" {
				t.Fatalf("outside file changed: %q", b)
			}
			if _, err := os.Lstat(filepath.Join(dir, "local", "data")); !os.IsNotExist(err) {
				t.Fatalf("destination exists after a refused archive: %v", err)
			}
		})
	}
}

// TestPlaceDirAndFile: a good tar (dirs, files, an inside symlink and an
// inside hard link) unpacks beneath the destination, merged with what is
// there; a file artifact lands inside an existing directory.
func TestPlaceDirAndFile(t *testing.T) {
	_, dir, root := taskDir(t)
	os.WriteFile(filepath.Join(dir, "local", "keep"), []byte("k"), 0o644)
	tb := mkTar(t,
		entry{name: "./", typ: tar.TypeDir, mode: 0o755},
		entry{name: "sub/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "sub/a.txt", typ: tar.TypeReg, body: "alpha"},
		entry{name: "run.sh", typ: tar.TypeReg, mode: 0o755, body: "#!/bin/sh"},
		entry{name: "link", link: "sub/a.txt", typ: tar.TypeSymlink},
		entry{name: "hard", link: "sub/a.txt", typ: tar.TypeLink},
	)
	a := &structs.TaskArtifact{GetterSource: "artifact://sha256/" + sum(tb), RelativeDest: "local"}
	if err := Place(root, a, bytes.NewReader(tb), 0); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"local/sub/a.txt": "alpha", "local/link": "alpha", "local/hard": "alpha", "local/keep": "k", "local/run.sh": "#!/bin/sh"} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "local/run.sh")); fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh mode %s", fi.Mode())
	}
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if strings.HasPrefix(n.Name(), ".artifact-") {
			t.Errorf("staging directory %s left behind", n.Name())
		}
	}
	f := &structs.TaskArtifact{GetterSource: "https://example.com/m/model.bin?x=1", RelativeDest: "local/", Checksum: "sha256:" + strings.Repeat("0", 64)}
	if err := Place(root, f, strings.NewReader("weights"), 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "local/model.bin")); string(b) != "weights" {
		t.Errorf("file artifact: %q", b)
	}
}

// TestCacheHTTPSChecksumMismatch: an https source whose bytes do not
// match the checksum fails with ErrChecksum naming both digests and
// leaves nothing in the cache; the right checksum caches a verified blob
// that a second Open serves without a download.
func TestCacheHTTPSChecksumMismatch(t *testing.T) {
	var hits int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		io.WriteString(w, "model weights")
	}))
	defer srv.Close()
	c := &Cache{Dir: filepath.Join(t.TempDir(), "sha256"), HTTP: srv.Client()}
	bad := strings.Repeat("1", 64)
	_, err := c.Open(context.Background(), &structs.TaskArtifact{GetterSource: srv.URL + "/w.bin", Checksum: "sha256:" + bad})
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "want sha256:"+bad) || !strings.Contains(err.Error(), "got sha256:"+sum([]byte("model weights"))) {
		t.Fatalf("got %v", err)
	}
	if ents, _ := os.ReadDir(c.Dir); len(ents) != 0 {
		t.Fatalf("cache holds %v after a mismatch", ents)
	}
	good := &structs.TaskArtifact{GetterSource: srv.URL + "/w.bin", Checksum: "sha256:" + sum([]byte("model weights"))}
	for i := 0; i < 2; i++ {
		f, err := c.Open(context.Background(), good)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "model weights" {
			t.Fatalf("read %q", b)
		}
	}
	if hits != 2 {
		t.Errorf("%d downloads, want 2 (one mismatch, one good, then the cache)", hits)
	}
	// A corrupted cached blob is detected and fetched again.
	os.WriteFile(filepath.Join(c.Dir, sum([]byte("model weights"))), []byte("model weightz"), 0o600)
	f, err := c.Open(context.Background(), good)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if hits != 3 {
		t.Errorf("corrupt cache entry not refetched: %d downloads", hits)
	}
	// Over the size limit.
	small := &Cache{Dir: filepath.Join(t.TempDir(), "sha256"), HTTP: srv.Client(), MaxBytes: 4}
	if _, err := small.Open(context.Background(), good); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
}

// TestCacheStoreSource fetches an artifact:// source from the store and
// refuses a store that serves other bytes.
func TestCacheStoreSource(t *testing.T) {
	st := newMemStore()
	body := []byte("dataset")
	st.blobs[sum(body)] = body
	c := &Cache{Dir: filepath.Join(t.TempDir(), "sha256"), Store: st}
	f, err := c.Open(context.Background(), &structs.TaskArtifact{GetterSource: "artifact://sha256/" + sum(body)})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	liar := strings.Repeat("b", 64)
	st.blobs[liar] = body
	if _, err := c.Open(context.Background(), &structs.TaskArtifact{GetterSource: "artifact://sha256/" + liar}); !errors.Is(err, ErrChecksum) {
		t.Fatalf("store serving wrong bytes: %v", err)
	}
	if _, err := c.Open(context.Background(), &structs.TaskArtifact{GetterSource: "artifact://sha256/" + strings.Repeat("c", 64)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown blob: %v", err)
	}
}

func outputsDir(t *testing.T, files map[string]string) *os.Root {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestCollectOutputsLimits: over max_files or max_bytes the collection
// fails with ErrTooLarge and returns no file at all.
func TestCollectOutputsLimits(t *testing.T) {
	r := outputsDir(t, map[string]string{"a": "1", "b/c": "22", "b/d": "333"})
	files, _, err := CollectOutputs(r, OutputLimits{})
	if err != nil || len(files) != 3 || files[1].Path != "b/c" || files[1].Size != 2 || files[1].Digest != sum([]byte("22")) {
		t.Fatalf("collect: %+v %v", files, err)
	}
	files, _, err = CollectOutputs(r, OutputLimits{MaxFiles: 2})
	if !errors.Is(err, ErrTooLarge) || files != nil || !strings.Contains(err.Error(), "more than 2 output files") {
		t.Fatalf("max files: %+v %v", files, err)
	}
	files, _, err = CollectOutputs(r, OutputLimits{MaxBytes: 5})
	if !errors.Is(err, ErrTooLarge) || files != nil || !strings.Contains(err.Error(), "over 5 bytes") {
		t.Fatalf("max bytes: %+v %v", files, err)
	}
}

// TestExploitOutputsNoFollow: a task's output directory with a symlink to
// a host file, a hard link to one, and a FIFO: none is read or uploaded.
func TestExploitOutputsNoFollow(t *testing.T) {
	host := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(host, []byte("root:secret"), 0o600)
	r := outputsDir(t, map[string]string{"real.txt": "ok"})
	dir := r.Name()
	os.Symlink(host, filepath.Join(dir, "sym"))
	os.Link(host, filepath.Join(dir, "hard"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)
	files, skipped, err := CollectOutputs(r, OutputLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != "real.txt" {
		t.Fatalf("files %+v", files)
	}
	if len(skipped) != 3 {
		t.Fatalf("skipped %v, want fifo, hard and sym", skipped)
	}
	st := newMemStore()
	if err := UploadOutputs(context.Background(), st, r, files, "j", "a"); err != nil {
		t.Fatal(err)
	}
	for _, b := range st.blobs {
		if strings.Contains(string(b), "secret") {
			t.Fatal("a host file was uploaded")
		}
	}
	// A second upload of the same outputs sends no blob.
	puts := st.puts
	if err := UploadOutputs(context.Background(), st, r, files, "j", "a2"); err != nil || st.puts != puts {
		t.Fatalf("second upload sent %d blobs (%v)", st.puts-puts, err)
	}
}

// TestPackLogsDeterministic: the same logs pack to the same bytes, and an
// entry reads back.
func TestPackLogsDeterministic(t *testing.T) {
	allocDir := t.TempDir()
	os.MkdirAll(filepath.Join(allocDir, "web", "logs"), 0o700)
	os.WriteFile(filepath.Join(allocDir, "web", "logs", "web.stdout.0"), []byte("hello\n"), 0o600)
	var a, b bytes.Buffer
	if n, err := PackLogs(allocDir, []string{"web"}, &a); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	PackLogs(allocDir, []string{"web"}, &b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two packs differ")
	}
	var out bytes.Buffer
	if _, err := ReadLogFromArchive(bytes.NewReader(a.Bytes()), "web", "web.stdout.0", &out); err != nil || out.String() != "hello\n" {
		t.Fatalf("%q %v", out.String(), err)
	}
	st := newMemStore()
	d, err := ArchiveLogs(context.Background(), st, allocDir, []string{"web"}, t.TempDir(), "j", "a")
	if err != nil || d != sum(a.Bytes()) {
		t.Fatalf("archive %s %v", d, err)
	}
}

// TestCachePrune keeps the cache under its bound, oldest use first, and
// never removes the blob in use.
func TestCachePrune(t *testing.T) {
	st := newMemStore()
	c := &Cache{Dir: filepath.Join(t.TempDir(), "sha256"), Store: st, MaxCacheBytes: 10}
	var ds []string
	for i := 0; i < 3; i++ {
		b := []byte(fmt.Sprintf("blob-%d", i)) // 6 bytes each
		d := sum(b)
		st.blobs[d] = b
		ds = append(ds, d)
		f, err := c.Open(context.Background(), &structs.TaskArtifact{GetterSource: "artifact://sha256/" + d})
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		old := time.Now().Add(time.Duration(i-10) * time.Minute)
		os.Chtimes(filepath.Join(c.Dir, d), old, old)
	}
	ents, _ := os.ReadDir(c.Dir)
	if len(ents) != 1 || ents[0].Name() != ds[2] {
		t.Fatalf("cache holds %v, want only the newest", ents)
	}
}
