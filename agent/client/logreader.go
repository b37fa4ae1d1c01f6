package client

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// logPollInterval is how often a following reader looks for new data.
const logPollInterval = 100 * time.Millisecond

// logReader reads dir/base.<n> from the oldest kept file to the newest.
// Without follow it ends (io.EOF) at the end of the newest file. With
// follow it waits for more data, moving to the next file on rotation, and
// ends when ctx is done (returning ctx's error) or when dead() reports the
// task finished and everything was read.
type logReader struct {
	ctx    context.Context
	dir    string
	base   string
	follow bool
	dead   func() bool

	closeOnce sync.Once
	closeCh   chan struct{}

	mu    sync.Mutex // serializes Read and guards f and index
	f     *os.File
	index int
	// startIndex and startOffset, when startIndex >= 0, make the reader
	// begin at that offset of that file (a tail) instead of the oldest.
	startIndex  int
	startOffset int64
}

func newLogReader(ctx context.Context, dir, base string, follow bool, dead func() bool) *logReader {
	return &logReader{ctx: ctx, dir: dir, base: base, follow: follow, dead: dead, index: -1, startIndex: -1, closeCh: make(chan struct{})}
}

// Read implements io.Reader.
func (r *logReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	for {
		select {
		case <-r.closeCh:
			return 0, fs.ErrClosed
		default:
		}
		if err := r.ctx.Err(); err != nil {
			return 0, err
		}
		if r.f == nil {
			ok, err := r.openNext()
			if err != nil {
				return 0, err
			}
			if !ok {
				if done, err := r.waitOrEnd(); done {
					return 0, err
				}
				continue
			}
		}
		n, err := r.f.Read(p)
		if n > 0 {
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		// At the end of this file: go on to a newer one if it exists.
		newer, lerr := r.hasNewer()
		if lerr != nil {
			return 0, lerr
		}
		if newer {
			// Drain what was written before the rotation, then switch.
			if n, _ := r.f.Read(p); n > 0 {
				return n, nil
			}
			r.f.Close()
			r.f = nil
			continue
		}
		if done, err := r.waitOrEnd(); done {
			return 0, err
		}
	}
}

// waitOrEnd decides what to do at the end of the data: without follow, or
// with a dead task whose output was all read, the stream ends (true,
// io.EOF). Otherwise it waits one poll interval (false) or returns ctx's
// error.
func (r *logReader) waitOrEnd() (bool, error) {
	if !r.follow {
		return true, io.EOF
	}
	if r.dead != nil && r.dead() {
		// The task is dead: read once more, since it may have written
		// between our last read and dying.
		if r.f != nil {
			if newer, _ := r.hasNewer(); !newer && r.atEOF() {
				return true, io.EOF
			}
			return false, nil
		}
		if idx, _ := logIndexes(r.dir, r.base); len(idx) == 0 || idx[len(idx)-1] <= r.index {
			return true, io.EOF
		}
		return false, nil
	}
	t := time.NewTimer(logPollInterval)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return true, r.ctx.Err()
	case <-r.closeCh:
		return true, fs.ErrClosed
	case <-t.C:
		return false, nil
	}
}

// atEOF reports whether the current file has no unread bytes.
func (r *logReader) atEOF() bool {
	pos, err := r.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return true
	}
	fi, err := r.f.Stat()
	if err != nil {
		return true
	}
	return pos >= fi.Size()
}

// openNext opens the oldest kept file with an index above the last one
// read. It reports false when there is none yet.
func (r *logReader) openNext() (bool, error) {
	idx, err := logIndexes(r.dir, r.base)
	if err != nil {
		return false, err
	}
	for _, i := range idx {
		if i <= r.index {
			continue
		}
		f, err := os.Open(filepath.Join(r.dir, r.base+"."+strconv.Itoa(i)))
		if errors.Is(err, fs.ErrNotExist) {
			// Rotated away between listing and opening: try the next.
			continue
		}
		if err != nil {
			return false, err
		}
		if r.startIndex >= 0 {
			if i == r.startIndex && r.startOffset > 0 {
				if _, err := f.Seek(r.startOffset, io.SeekStart); err != nil {
					f.Close()
					return false, err
				}
			}
			r.startIndex = -1
		}
		r.f, r.index = f, i
		return true, nil
	}
	return false, nil
}

func (r *logReader) hasNewer() (bool, error) {
	idx, err := logIndexes(r.dir, r.base)
	if err != nil {
		return false, err
	}
	return len(idx) > 0 && idx[len(idx)-1] > r.index, nil
}

// Close ends a waiting Read and releases the open file. Reads after Close
// fail with fs.ErrClosed.
func (r *logReader) Close() error {
	r.closeOnce.Do(func() { close(r.closeCh) })
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != nil {
		err := r.f.Close()
		r.f = nil
		return err
	}
	return nil
}
