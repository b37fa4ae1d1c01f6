// Package artifacts is a server's content-addressed blob store: each blob
// lives at <dir>/sha256/<first two hex digits>/<hex>, where <hex> is the
// lower-case SHA-256 of its bytes, and replication that fetches a blob this
// server lacks from another server (replicate.go).
//
// Writes go to a temporary file beside the final name, are hashed while
// they stream, fsynced, checked against the digest they claim, renamed into
// place and the directory fsynced: a crash leaves either the whole blob or
// no blob. Reads hash while they stream too and hold back the last
// VerifyTail bytes until the whole blob has been hashed: a blob whose bytes
// changed on disk ends in ErrCorrupt instead of its last bytes, so no
// reader ever gets a complete copy of bad bytes, and a blob of at most
// VerifyTail bytes gives no byte at all before the error. Memory is bounded
// by the copy buffer and the tail whatever the blob's size.
//
// Every file access goes through an os.Root opened on the store directory,
// so no name, link or ".." can reach outside it.
package artifacts

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// VerifyTail is how many bytes at the end of a blob a reader holds back
// until the digest of the whole blob is checked: 64 KiB.
const VerifyTail = 64 << 10

// copyBufSize is the buffer of each streamed copy: 1 MiB.
const copyBufSize = 1 << 20

// Errors of the store. They wrap structs sentinels where the HTTP API maps
// them to a status.
var (
	// ErrNotFound: the store has no blob of that digest (wraps
	// structs.ErrNotFound).
	ErrNotFound = fmt.Errorf("artifact blob not on this server: %w", structs.ErrNotFound)
	// ErrDigestMismatch: the bytes written do not hash to the digest they
	// claimed (wraps structs.ErrInvalid); nothing was stored.
	ErrDigestMismatch = fmt.Errorf("artifact digest mismatch: %w", structs.ErrInvalid)
	// ErrTooLarge: the bytes written exceed the size limit (HTTP 413);
	// nothing was stored.
	ErrTooLarge = errors.New("artifact over the size limit")
	// ErrCorrupt: a stored blob's bytes no longer hash to its digest, or
	// its size differs from the one expected. The reader stops with it
	// before handing out the blob's last bytes.
	ErrCorrupt = errors.New("artifact blob corrupt on disk")
)

// Store is a blob store rooted at one directory. Its methods are safe for
// concurrent use: concurrent Puts of one digest each write their own
// temporary file, and the renames replace a blob by identical bytes.
type Store struct {
	root *os.Root
	dir  string
}

// Open opens (creating, mode 0700) the store at dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	if err := root.MkdirAll("sha256", 0o700); err != nil {
		root.Close()
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	st := &Store{root: root, dir: dir}
	// No upload runs before Open returns: every temporary file is a
	// leftover of an upload a crash interrupted.
	if _, err := st.RemoveTemp(0); err != nil {
		root.Close()
		return nil, err
	}
	return st, nil
}

// tmpPrefix starts the name of an upload's temporary file, written
// beside the blob's final name (Put).
const tmpPrefix = ".tmp-"

// RemoveTemp removes the temporary files of uploads (".tmp-*" regular
// files under sha256/) last written at least olderThan ago (0: all of
// them) and returns how many it removed. A younger one may be an upload
// in flight. Open calls it with 0 (no upload can run then); a periodic
// sweep calls it with a grace longer than any upload takes. It stops at
// the first error other than a file already gone.
func (s *Store) RemoveTemp(olderThan time.Duration) (int, error) {
	n := 0
	now := time.Now()
	err := fs.WalkDir(s.root.FS(), "sha256", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(d.Name(), tmpPrefix) {
			return nil
		}
		if olderThan > 0 {
			fi, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if now.Sub(fi.ModTime()) < olderThan {
				return nil
			}
		}
		if err := s.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("artifact store: remove temporary files: %w", err)
	}
	return n, nil
}

// Close releases the store's directory handle.
func (s *Store) Close() error { return s.root.Close() }

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// blobPath returns the blob's path inside the root, "sha256/ab/<hex>".
func blobPath(digest string) string { return path.Join("sha256", digest[:2], digest) }

// check validates a digest before it becomes a path.
func check(digest string) error { return structs.ValidArtifactDigest("digest", digest) }

// Has reports whether a blob of digest is stored and its size. It does not
// hash it (Open does).
func (s *Store) Has(digest string) (bool, int64, error) {
	if err := check(digest); err != nil {
		return false, 0, err
	}
	st, err := s.root.Stat(blobPath(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("artifact store: %w", err)
	}
	return st.Mode().IsRegular(), st.Size(), nil
}

// Put streams r into the blob of digest, reading at most maxSize bytes
// (no limit when maxSize <= 0). It returns the size written and whether
// a new blob was created; a blob already stored is left as it is and r is
// not read (created false). Errors: ErrDigestMismatch when the bytes hash
// to another digest, ErrTooLarge past maxSize, an error wrapping
// structs.ErrInvalid for a malformed digest, and r's or the disk's errors;
// on any error nothing is stored.
func (s *Store) Put(digest string, r io.Reader, maxSize int64) (size int64, created bool, err error) {
	if err := check(digest); err != nil {
		return 0, false, err
	}
	if ok, n, err := s.Has(digest); err != nil {
		return 0, false, err
	} else if ok {
		return n, false, nil
	}
	dir := path.Join("sha256", digest[:2])
	if err := s.root.MkdirAll(dir, 0o700); err != nil {
		return 0, false, fmt.Errorf("artifact store: %w", err)
	}
	tmp := path.Join(dir, tmpPrefix+digest+"-"+structs.GenerateUUID())
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, false, fmt.Errorf("artifact store: %w", err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			_ = s.root.Remove(tmp)
		}
	}()
	h := sha256.New()
	src := r
	if maxSize > 0 {
		src = io.LimitReader(r, maxSize+1)
	}
	n, err := io.CopyBuffer(io.MultiWriter(f, h), src, make([]byte, copyBufSize))
	if err != nil {
		return 0, false, fmt.Errorf("artifact store: receive %s: %w", digest, err)
	}
	if maxSize > 0 && n > maxSize {
		return 0, false, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxSize)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digest {
		return 0, false, fmt.Errorf("%w: the %d bytes received hash to %s, not %s", ErrDigestMismatch, n, got, digest)
	}
	if err := f.Sync(); err != nil {
		return 0, false, fmt.Errorf("artifact store: fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		f = nil
		return 0, false, fmt.Errorf("artifact store: close: %w", err)
	}
	f = nil
	if err := s.root.Rename(tmp, blobPath(digest)); err != nil {
		return 0, false, fmt.Errorf("artifact store: rename: %w", err)
	}
	if err := s.syncDir(dir); err != nil {
		return n, true, err
	}
	return n, true, nil
}

func (s *Store) syncDir(dir string) error {
	d, err := s.root.Open(dir)
	if err != nil {
		return fmt.Errorf("artifact store: open dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("artifact store: fsync dir: %w", err)
	}
	return nil
}

// Open returns a reader of the blob of digest that verifies it while it
// streams (see the package comment), and the blob's size. wantSize, when
// not negative, is the size the metadata records: a file of another size
// is ErrCorrupt at once. Errors: ErrNotFound, ErrCorrupt, an error
// wrapping structs.ErrInvalid for a malformed digest.
func (s *Store) Open(digest string, wantSize int64) (*Reader, error) {
	if err := check(digest); err != nil {
		return nil, err
	}
	f, err := s.root.Open(blobPath(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrCorrupt, digest)
	}
	if wantSize >= 0 && st.Size() != wantSize {
		f.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes on disk, the metadata says %d", ErrCorrupt, digest, st.Size(), wantSize)
	}
	return &Reader{f: f, digest: digest, size: st.Size(), h: sha256.New()}, nil
}

// Stat returns the blob file's information (its ModTime is when it was
// stored). Errors: ErrNotFound.
func (s *Store) Stat(digest string) (fs.FileInfo, error) {
	if err := check(digest); err != nil {
		return nil, err
	}
	st, err := s.root.Stat(blobPath(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	return st, err
}

// Remove deletes the blob of digest; a missing blob is not an error.
func (s *Store) Remove(digest string) error {
	if err := check(digest); err != nil {
		return err
	}
	if err := s.root.Remove(blobPath(digest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("artifact store: %w", err)
	}
	return nil
}

// List returns the digests of every stored blob (temporary files left by
// a crash are skipped), in no particular order.
func (s *Store) List() ([]string, error) {
	var out []string
	err := fs.WalkDir(s.root.FS(), "sha256", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.Type().IsRegular() && check(name) == nil && strings.HasPrefix(name, path.Base(path.Dir(p))) {
			out = append(out, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("artifact store: list: %w", err)
	}
	return out, nil
}

// Reader streams one blob, verifying its SHA-256: it hands out all but the
// last VerifyTail bytes as they are read and hashed, then reads the rest,
// checks the digest of the whole, and only then hands out the tail; on a
// mismatch Read returns ErrCorrupt instead.
type Reader struct {
	f      *os.File
	digest string
	size   int64
	h      hash.Hash
	// released counts the bytes handed out before the tail.
	released int64
	// tail holds the verified last bytes still to hand out; verified is
	// set once the digest matched.
	tail     []byte
	verified bool
	err      error
}

// Size returns the blob's size in bytes.
func (r *Reader) Size() int64 { return r.size }

// Read implements io.Reader (see Reader).
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.verified {
		if len(r.tail) == 0 {
			return 0, io.EOF
		}
		n := copy(p, r.tail)
		r.tail = r.tail[n:]
		return n, nil
	}
	head := r.size - VerifyTail
	if r.released < head {
		if int64(len(p)) > head-r.released {
			p = p[:head-r.released]
		}
		n, err := r.f.Read(p)
		r.h.Write(p[:n])
		r.released += int64(n)
		if err == io.EOF {
			err = r.fail(fmt.Errorf("%w: %s ended after %d of %d bytes", ErrCorrupt, r.digest, r.released, r.size))
		}
		return n, err
	}
	if err := r.verifyTail(); err != nil {
		return 0, r.fail(err)
	}
	return r.Read(p)
}

// verifyTail reads the blob's last bytes, checks that nothing follows and
// that the whole hashes to the digest.
func (r *Reader) verifyTail() error {
	buf := make([]byte, r.size-r.released)
	if _, err := io.ReadFull(r.f, buf); err != nil {
		return fmt.Errorf("%w: %s: reading its last %d bytes: %v", ErrCorrupt, r.digest, len(buf), err)
	}
	var one [1]byte
	if n, _ := r.f.Read(one[:]); n != 0 {
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrCorrupt, r.digest, r.size)
	}
	r.h.Write(buf)
	if got := hex.EncodeToString(r.h.Sum(nil)); got != r.digest {
		return fmt.Errorf("%w: %s hashes to %s", ErrCorrupt, r.digest, got)
	}
	r.tail, r.verified = buf, true
	return nil
}

func (r *Reader) fail(err error) error {
	r.err = err
	return err
}

// Close closes the blob's file.
func (r *Reader) Close() error { return r.f.Close() }
