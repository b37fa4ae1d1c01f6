package api

import (
	"bytes"
	"testing"
)

func TestExecFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	frames := []struct {
		typ byte
		p   string
	}{{ExecFrameStdout, "hello\n"}, {ExecFrameStderr, ""}, {ExecFrameExit, "3"}}
	for _, f := range frames {
		if err := WriteExecFrame(&buf, f.typ, []byte(f.p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range frames {
		typ, p, err := ReadExecFrame(&buf)
		if err != nil || typ != f.typ || string(p) != f.p {
			t.Fatalf("frame %c %q %v, want %c %q", typ, p, err, f.typ, f.p)
		}
	}
	if _, _, err := ReadExecFrame(bytes.NewReader([]byte{'o', 0xff, 0xff, 0xff, 0xff})); err == nil {
		t.Fatal("oversized frame accepted")
	}
	if _, _, err := ReadExecFrame(bytes.NewReader([]byte{'o', 0, 0})); err == nil {
		t.Fatal("truncated header accepted")
	}
}

func FuzzReadExecFrame(f *testing.F) {
	f.Add([]byte{'o', 0, 0, 0, 2, 'h', 'i'})
	f.Add([]byte{'x', 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			_, p, err := ReadExecFrame(r)
			if err != nil {
				return
			}
			if len(p) > MaxExecFrame {
				t.Fatalf("frame of %d bytes", len(p))
			}
		}
	})
}
