package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpulayer/gpulayer/server/fsm"
	"github.com/gpulayer/gpulayer/structs"
)

// seedArchive builds a well-formed archive around state.
func seedArchive(meta string, state []byte) []byte {
	var b bytes.Buffer
	b.WriteString(ArchiveMagic)
	b.WriteByte(ArchiveVersion)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(meta)))
	b.WriteString(meta)
	_ = binary.Write(&b, binary.BigEndian, uint64(len(state)))
	b.Write(state)
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// FuzzOpenArchive feeds arbitrary bytes to the archive reader and, when
// they pass its checks, the state to a scratch FSM: it must return an
// error wrapping ErrSnapshotArchive or succeed, and never panic.
func FuzzOpenArchive(f *testing.F) {
	empty := append([]byte(fsm.SnapshotMagic+"\x01"), byte(fsm.SnapshotRecordEnd), 0x81, 0xa7, 'R', 'e', 'c', 'o', 'r', 'd', 's', 0x00)
	f.Add(seedArchive(`{"Version":1,"ID":"x","Index":3,"Term":1}`, empty))
	f.Add(seedArchive(`{}`, []byte("junk")))
	f.Add([]byte(ArchiveMagic))
	f.Add([]byte{})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "a")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		meta, st, err := openArchive(file)
		if err != nil {
			if !errors.Is(err, ErrSnapshotArchive) || !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrSnapshotArchive and ErrInvalid", err)
			}
			return
		}
		if meta.Size != st.Size() {
			t.Fatalf("meta size %d, state section %d", meta.Size, st.Size())
		}
		scratch, err := fsm.New(fsm.Config{})
		if err != nil {
			t.Fatal(err)
		}
		_ = scratch.RaftFSM().Restore(io.NopCloser(st))
	})
}
