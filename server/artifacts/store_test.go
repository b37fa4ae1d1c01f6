package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStorePutOpen: a blob round-trips at sha256/ab/<hex>, a second Put of
// the same digest does not read its reader, and no temporary file stays.
func TestStorePutOpen(t *testing.T) {
	s := openStore(t)
	data := bytes.Repeat([]byte("0123456789"), 30000) // 300 kB, more than VerifyTail
	d := digestOf(data)
	n, created, err := s.Put(d, bytes.NewReader(data), 0)
	if err != nil || !created || n != int64(len(data)) {
		t.Fatalf("Put = %d %v %v", n, created, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "sha256", d[:2], d)); err != nil {
		t.Fatalf("blob not at sha256/%s/%s: %v", d[:2], d, err)
	}
	_, created, err = s.Put(d, iotestErrReader{}, 0)
	if err != nil || created {
		t.Fatalf("second Put read its body or failed: created %v, %v", created, err)
	}
	rd, err := s.Open(d, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rd)
	rd.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Dir(), "sha256", d[:2]))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want the blob alone", len(entries))
	}
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("must not be read") }

// TestStorePutRefusesBadInput: a body of other bytes, a body over the
// limit and a malformed digest store nothing.
func TestStorePutRefusesBadInput(t *testing.T) {
	s := openStore(t)
	data := []byte("hello artifact")
	d := digestOf(data)
	if _, _, err := s.Put(d, strings.NewReader("other bytes"), 0); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("mismatched body: %v", err)
	}
	if _, _, err := s.Put(d, bytes.NewReader(data), 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize body: %v", err)
	}
	for _, bad := range []string{"../../etc/passwd", strings.ToUpper(d), d[:63], ""} {
		if _, _, err := s.Put(bad, bytes.NewReader(data), 0); err == nil {
			t.Fatalf("digest %q accepted", bad)
		}
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Fatalf("store holds %v after refused puts", list)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Dir(), "sha256", d[:2]))
	if len(entries) != 0 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

// TestStoreReadDetectsCorruption is Must-show 2 (store half): a blob whose
// bytes changed on disk is an error, never its bytes. A small blob gives
// no byte at all; a large one stops before its last VerifyTail bytes, so
// the reader never holds a complete bad copy. A truncated blob is refused
// when opened.
func TestStoreReadDetectsCorruption(t *testing.T) {
	for _, size := range []int{100, 3 * VerifyTail, 5 << 20} {
		s := openStore(t)
		data := bytes.Repeat([]byte{7}, size)
		d := digestOf(data)
		if _, _, err := s.Put(d, bytes.NewReader(data), 0); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(s.Dir(), "sha256", d[:2], d)
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{8}, int64(size/2)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		rd, err := s.Open(d, int64(size))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rd)
		rd.Close()
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("size %d: corrupt read ended with %v, want ErrCorrupt", size, err)
		}
		if len(got) > size-VerifyTail && len(got) > 0 {
			t.Fatalf("size %d: %d bytes handed out before the error, more than all but the tail", size, len(got))
		}
		if size <= VerifyTail && len(got) != 0 {
			t.Fatalf("size %d: a small corrupt blob handed out %d bytes", size, len(got))
		}
		if err := os.Truncate(p, int64(size-1)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Open(d, int64(size)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("size %d: truncated blob opened: %v", size, err)
		}
	}
}

// TestStoreReadBoundedMemory reads a 64 MiB blob and checks the heap does
// not grow with it (streamed, not held).
func TestStoreReadBoundedMemory(t *testing.T) {
	s := openStore(t)
	const size = 64 << 20
	h := sha256.New()
	src := io.TeeReader(io.LimitReader(zeros{}, size), h)
	tmp := filepath.Join(t.TempDir(), "src")
	f, _ := os.Create(tmp)
	io.Copy(f, src)
	f.Close()
	d := hex.EncodeToString(h.Sum(nil))
	f, _ = os.Open(tmp)
	defer f.Close()
	if _, _, err := s.Put(d, f, 0); err != nil {
		t.Fatal(err)
	}
	rd, err := s.Open(d, size)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n, err := io.CopyBuffer(io.Discard, rd, make([]byte, 1<<20))
	runtime.ReadMemStats(&after)
	if err != nil || n != size {
		t.Fatalf("read %d, %v", n, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("reading a %d-byte blob allocated %d bytes; the read must stream", size, alloc)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestStoreRemovesLeftoverTempFiles: the temporary files of uploads a
// crash interrupted are removed when the store opens (no upload runs
// then), and RemoveTemp (the hourly orphan sweep) removes those older
// than its grace while a younger one (an upload in flight) and the blobs
// stay.
func TestStoreRemovesLeftoverTempFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("a stored blob")
	d := digestOf(data)
	if _, _, err := s.Put(d, bytes.NewReader(data), 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	sub := filepath.Join(dir, "sha256", d[:2])
	leftover := filepath.Join(sub, ".tmp-"+d+"-crashed")
	if err := os.WriteFile(leftover, []byte("half an upload"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover temporary file after Open: %v", err)
	}
	if ok, _, err := s.Has(d); !ok || err != nil {
		t.Fatalf("Open removed a blob: %v %v", ok, err)
	}

	old := filepath.Join(sub, ".tmp-"+d+"-old")
	young := filepath.Join(sub, ".tmp-"+d+"-young")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	n, err := s.RemoveTemp(time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("RemoveTemp(1h) = %d %v, want 1", n, err)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a temporary file two hours old stayed: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Fatalf("a young temporary file (an upload in flight) was removed: %v", err)
	}
	if ds, err := s.List(); err != nil || len(ds) != 1 || ds[0] != d {
		t.Fatalf("List = %v %v", ds, err)
	}
}
