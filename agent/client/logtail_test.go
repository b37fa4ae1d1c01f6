package client

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// lastLines returns the last n lines of s (an unfinished last line counts).
func lastLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if n > len(lines) {
		n = len(lines)
	}
	return strings.Join(lines[len(lines)-n:], "")
}

func TestTailStartAcrossRotations(t *testing.T) {
	for _, tail := range []string{"", "partial"} {
		dir := t.TempDir()
		w, err := newRotatingWriter(dir, "main.stdout", 64, 100)
		if err != nil {
			t.Fatal(err)
		}
		var all strings.Builder
		for i := 0; i < 40; i++ {
			line := fmt.Sprintf("line %02d %s\n", i, strings.Repeat("y", i%9))
			all.WriteString(line)
			if _, err := w.Write([]byte(line)); err != nil {
				t.Fatal(err)
			}
		}
		if tail != "" {
			all.WriteString(tail)
			if _, err := w.Write([]byte(tail)); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		if idx, _ := logIndexes(dir, "main.stdout"); len(idx) < 5 {
			t.Fatalf("want several files, got %v", idx)
		}
		read := func(lines int, nbytes int64) string {
			t.Helper()
			r := newLogReader(context.Background(), dir, "main.stdout", false, nil)
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			idx, off, err := tailStart(root, "main.stdout", lines, nbytes)
			if err != nil {
				t.Fatal(err)
			}
			r.startIndex, r.startOffset, r.index = idx, off, idx-1
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		for _, n := range []int{1, 2, 5, 17, 40, 41, 500} {
			t.Run(fmt.Sprintf("%s lines %d", tail, n), func(t *testing.T) {
				if got, want := read(n, 0), lastLines(all.String(), n); got != want {
					t.Fatalf("tail -n %d:\n%q\nwant\n%q", n, got, want)
				}
			})
		}
		for _, n := range []int64{1, 10, 64, 65, 300, 100000} {
			t.Run(fmt.Sprintf("%s bytes %d", tail, n), func(t *testing.T) {
				s := all.String()
				want := s[max(0, len(s)-int(n)):]
				if got := read(0, n); got != want {
					t.Fatalf("tail -c %d: %q, want %q", n, got, want)
				}
			})
		}
	}
}

func TestAllocLogsTailRejectsNegative(t *testing.T) {
	c := &Client{}
	if _, err := c.AllocLogsTail(context.Background(), "a", "t", "stdout", false, -1, 0); err == nil || !strings.Contains(err.Error(), "non-negative") {
		t.Fatalf("negative lines: %v", err)
	}
}
