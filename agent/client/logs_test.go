package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testLines returns n lines of varying length, plus one line longer than
// limit in the middle.
func testLines(n, limit int) []string {
	var lines []string
	for i := 0; i < n; i++ {
		if i == n/2 {
			lines = append(lines, strings.Repeat("L", limit*2+7)+"\n")
		}
		lines = append(lines, fmt.Sprintf("line %d %s\n", i, strings.Repeat("x", i%23)))
	}
	return lines
}

func readAllFiles(t *testing.T, dir, base string) ([][]byte, []int) {
	t.Helper()
	idx, err := logIndexes(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, i := range idx {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s.%d", base, i)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out, idx
}

func TestRotatingWriter(t *testing.T) {
	const limit = 64
	cases := []struct {
		name  string
		chunk func(lines []string) [][]byte // how the lines reach Write
	}{
		{"one write per line", func(lines []string) [][]byte {
			var out [][]byte
			for _, l := range lines {
				out = append(out, []byte(l))
			}
			return out
		}},
		{"arbitrary 13-byte chunks", func(lines []string) [][]byte {
			all := []byte(strings.Join(lines, ""))
			var out [][]byte
			for len(all) > 0 {
				n := min(13, len(all))
				out = append(out, all[:n])
				all = all[n:]
			}
			return out
		}},
		{"one big write", func(lines []string) [][]byte {
			return [][]byte{[]byte(strings.Join(lines, ""))}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := newRotatingWriter(dir, "main.stdout", limit, 1000)
			if err != nil {
				t.Fatal(err)
			}
			lines := testLines(60, limit)
			for _, c := range tc.chunk(lines) {
				if n, err := w.Write(c); err != nil || n != len(c) {
					t.Fatalf("Write = %d, %v; want %d", n, err, len(c))
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			files, idx := readAllFiles(t, dir, "main.stdout")
			if len(files) < 5 {
				t.Fatalf("only %d files; rotation did not happen", len(files))
			}
			var joined []byte
			for i, f := range files {
				joined = append(joined, f...)
				if len(f) > 2*limit {
					t.Errorf("file %d is %d bytes, over twice the %d byte limit", idx[i], len(f), limit)
				}
				last := i == len(files)-1
				isLongLinePart := bytes.Count(f, []byte("L")) >= limit/2
				if !last && !isLongLinePart && !bytes.HasSuffix(f, []byte("\n")) {
					t.Errorf("file %d does not end at a line end: %q", idx[i], f)
				}
			}
			if want := strings.Join(lines, ""); string(joined) != want {
				t.Fatalf("concatenated files differ from input:\n got %q\nwant %q", joined, want)
			}
		})
	}
}

func TestRotatingWriterKeepsMaxFiles(t *testing.T) {
	dir := t.TempDir()
	w, err := newRotatingWriter(dir, "main.stderr", 32, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		fmt.Fprintf(w, "line %03d of the log\n", i)
	}
	w.Close()
	files, idx := readAllFiles(t, dir, "main.stderr")
	if len(files) != 3 {
		t.Fatalf("kept %d files (%v), want 3", len(files), idx)
	}
	if last := files[len(files)-1]; !bytes.Contains(last, []byte("line 099")) {
		t.Fatalf("newest file lacks the last line: %q", last)
	}
	// A new writer (task restart) continues in the newest file.
	w2, err := newRotatingWriter(dir, "main.stderr", 32, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if w2.Index() != idx[len(idx)-1] {
		t.Fatalf("reopened at index %d, want %d", w2.Index(), idx[len(idx)-1])
	}
}

func TestLogReaderFollowSeesEverything(t *testing.T) {
	dir := t.TempDir()
	var dead atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The follower starts before the first file exists.
	r := newLogReader(ctx, dir, "main.stdout", true, dead.Load)
	defer r.Close()
	got := make(chan []byte, 1)
	errc := make(chan error, 1)
	go func() {
		b, err := io.ReadAll(r)
		got <- b
		errc <- err
	}()

	w, err := newRotatingWriter(dir, "main.stdout", 128, 1000)
	if err != nil {
		t.Fatal(err)
	}
	lines := testLines(300, 128)
	for i, l := range lines {
		if _, err := w.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	w.Close()
	dead.Store(true)
	select {
	case b := <-got:
		if err := <-errc; err != nil {
			t.Fatalf("ReadAll: %v", err)
		}
		if want := strings.Join(lines, ""); string(b) != want {
			t.Fatalf("follower read %d bytes, want %d", len(b), len(want))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("follower did not end after the task died")
	}
}

func TestLogReaderNoFollowAndCancel(t *testing.T) {
	dir := t.TempDir()
	w, err := newRotatingWriter(dir, "main.stdout", 16, 1000)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(w, "aaaa\nbbbb\ncccc\ndddd\neeee\n")
	t.Run("no follow reads to the end", func(t *testing.T) {
		r := newLogReader(context.Background(), dir, "main.stdout", false, nil)
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil || string(b) != "aaaa\nbbbb\ncccc\ndddd\neeee\n" {
			t.Fatalf("got %q, %v", b, err)
		}
	})
	t.Run("follow ends with ctx", func(t *testing.T) {
		// Every read is bounded: a follower that stops delivering, spins
		// on empty reads or ignores its context fails within seconds
		// rather than hanging the package's tests.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := newLogReader(ctx, dir, "main.stdout", true, func() bool { return false })
		defer r.Close()
		buf := make([]byte, 1024)
		n := 0
		within(t, 10*time.Second, "the follower to return the 25 bytes written", func(stop <-chan struct{}) error {
			for n < 25 {
				select {
				case <-stop:
					return nil
				default:
				}
				m, err := r.Read(buf[n:])
				if err != nil {
					return err
				}
				n += m
			}
			return nil
		})
		if got := string(buf[:n]); got != "aaaa\nbbbb\ncccc\ndddd\neeee\n" {
			t.Fatalf("followed %q", got)
		}
		cancel()
		within(t, 10*time.Second, "Read to return after cancel", func(<-chan struct{}) error {
			if _, err := r.Read(buf); err != context.Canceled {
				return fmt.Errorf("Read after cancel: %v, want context.Canceled", err)
			}
			return nil
		})
	})
	w.Close()
}

// within runs fn in a goroutine and fails t when it returns an error or
// has not returned after d (then stop is closed so a loop in fn can end).
func within(t *testing.T, d time.Duration, what string, fn func(stop <-chan struct{}) error) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- fn(stop) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		close(stop)
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}
