package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// writeRaftStore creates <dir>/raft/raft.db holding n log entries of size
// bytes each and returns its path.
func writeRaftStore(tb testing.TB, dir string, n, size int) string {
	tb.Helper()
	raftDir := filepath.Join(dir, "raft")
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(raftDir, "raft.db")
	store, err := raftboltdb.New(raftboltdb.Options{Path: path, NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	const batch = 1000
	for start := 1; start <= n; start += batch {
		var logs []*raft.Log
		for i := start; i < start+batch && i <= n; i++ {
			logs = append(logs, &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: data})
		}
		if err := store.StoreLogs(logs); err != nil {
			tb.Fatal(err)
		}
	}
	if err := store.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		tb.Fatal(err)
	}
	if err := store.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TestExploitCorruptRaftStoreRefusedAtStart: a raft.db that is truncated,
// has overwritten pages or an overwritten meta page stops the server at
// start with one error that names the file and how to recover, instead of
// a SIGBUS, a bolt assertion and its stack, or a silently short state.
func TestExploitCorruptRaftStoreRefusedAtStart(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(t *testing.T, path string)
	}{
		{"truncated", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"overwritten pages", func(t *testing.T, path string) {
			overwrite(t, path, 6*4096, 8*4096)
		}},
		{"overwritten meta pages", func(t *testing.T, path string) {
			overwrite(t, path, 0, 2*4096)
		}},
		{"empty", func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeRaftStore(t, dir, 2000, 200)
			tc.corrupt(t, path)
			_, trans := raft.NewInmemTransport("")
			s, err := NewServer(&Config{DataDir: dir, NodeName: "s1", Transport: trans})
			if err == nil {
				_ = s.Shutdown()
				t.Fatal("a server started on a corrupt raft.db")
			}
			msg := err.Error()
			if !errors.Is(err, ErrCorruptStore) || !strings.Contains(msg, path) || !strings.Contains(msg, "move the server data dir aside") {
				t.Fatalf("start on a corrupt raft.db: %v\nwant ErrCorruptStore naming %s and how to recover", err, path)
			}
			t.Log(msg)
			if strings.Count(msg, "\n") > 0 {
				t.Fatalf("the error is not one line: %q", msg)
			}
		})
	}
}

// TestRaftStoreCheckPassesSoundStore: a sound store passes the check and the
// server starts on it.
func TestRaftStoreCheckPassesSoundStore(t *testing.T) {
	dir := t.TempDir()
	path := writeRaftStore(t, dir, 500, 100)
	if err := checkRaftStore(path); err != nil {
		t.Fatal(err)
	}
	if err := checkRaftStore(filepath.Join(dir, "missing.db")); err != nil {
		t.Fatalf("a missing store: %v", err)
	}
}

// overwrite writes garbage over bytes [from, to) of the file at path.
func overwrite(t *testing.T, path string, from, to int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := make([]byte, to-from)
	for i := range junk {
		junk[i] = byte(0xA5 ^ i)
	}
	if _, err := f.WriteAt(junk, from); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRaftStoreCheck100k measures the start-up check of a raft.db
// holding 100,000 entries of 500 bytes.
func BenchmarkRaftStoreCheck100k(b *testing.B) {
	path := writeRaftStore(b, b.TempDir(), 100_000, 500)
	fi, _ := os.Stat(path)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := checkRaftStore(path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
}
