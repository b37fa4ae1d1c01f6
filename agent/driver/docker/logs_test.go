package docker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func frame(stream byte, payload string) []byte {
	var hdr [8]byte
	hdr[0] = stream
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(payload)))
	return append(hdr[:], payload...)
}

func TestDemuxTimestamped(t *testing.T) {
	var in bytes.Buffer
	in.Write(frame(1, "2026-11-30T23:00:00.000000001Z hello\n"))
	in.Write(frame(2, "2026-11-30T23:00:00.000000002Z oops\n"))
	in.Write(frame(0, "2026-11-30T23:00:00.000000003Z stdin is ignored\n"))
	in.Write(frame(1, "no-timestamp-line\n"))
	var out, errOut, stamps bytes.Buffer
	err := demuxTimestamped(&in, func(stream byte, ts string, line []byte) error {
		stamps.WriteString(ts + ";")
		if stream == 2 {
			errOut.Write(line)
		} else {
			out.Write(line)
		}
		return nil
	})
	if !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
	if out.String() != "hello\nno-timestamp-line\n" || errOut.String() != "oops\n" {
		t.Fatalf("stdout %q stderr %q", out.String(), errOut.String())
	}
	if stamps.String() != "2026-11-30T23:00:00.000000001Z;2026-11-30T23:00:00.000000002Z;;" {
		t.Fatalf("timestamps %q", stamps.String())
	}
	// A truncated frame is an error, not a hang or a panic.
	trunc := frame(1, "2026-11-30T23:00:00Z partial")
	if err := demuxTimestamped(bytes.NewReader(trunc[:12]), func(byte, string, []byte) error { return nil }); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("truncated frame: %v", err)
	}
}

func FuzzDemuxTimestamped(f *testing.F) {
	f.Add(frame(1, "2026-11-30T23:00:00Z a\n"))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 5, 'x'})
	f.Add([]byte{2, 0, 0, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		_ = demuxTimestamped(bytes.NewReader(b), func(stream byte, ts string, line []byte) error {
			total += len(ts) + len(line)
			return nil
		})
		if total > len(b) {
			t.Fatalf("decoded %d bytes from %d", total, len(b))
		}
	})
}
