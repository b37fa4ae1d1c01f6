package client

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
)

// logPollInterval is how often a following reader looks for new data.
const logPollInterval = 100 * time.Millisecond

// logReader reads base.<n> of a log directory from the oldest kept file to
// the newest. The directory is opened beneath its allocation directory
// (package allocdir) and every file is checked before a byte is read, so
// a symlink or hard link a task planted never reads a host file back.
// Without follow it ends (io.EOF) at the end of the newest file. With
// follow it waits for more data, moving to the next file on rotation, and
// ends when ctx is done (returning ctx's error) or when dead() reports the
// task finished and everything was read.
type logReader struct {
	ctx context.Context
	// anchor and rel: the log directory is rel beneath anchor.
	anchor string
	rel    string
	root   *os.Root // opened on first use; nil until the directory exists
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

// newLogReader reads dir/base.<n>, with dir opened by path (tests and
// directories no task can change).
func newLogReader(ctx context.Context, dir, base string, follow bool, dead func() bool) *logReader {
	return newLogReaderBeneath(ctx, dir, "", base, follow, dead)
}

// newLogReaderBeneath reads base.<n> of the log directory rel (slashes)
// beneath the allocation directory allocDir.
func newLogReaderBeneath(ctx context.Context, allocDir, rel, base string, follow bool, dead func() bool) *logReader {
	return &logReader{ctx: ctx, anchor: allocDir, rel: rel, base: base, follow: follow, dead: dead, index: -1, startIndex: -1, closeCh: make(chan struct{})}
}

// dirRoot returns the log directory's root, opening it on first use; nil
// (and no error) while the directory does not exist.
func (r *logReader) dirRoot() (*os.Root, error) {
	if r.root != nil {
		return r.root, nil
	}
	root, err := allocdir.OpenRoot(r.anchor, r.rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.root = root
	return root, nil
}

// indexes lists the rotation indexes of the log files, none while the
// directory does not exist.
func (r *logReader) indexes() ([]int, error) {
	root, err := r.dirRoot()
	if root == nil || err != nil {
		return nil, err
	}
	return logIndexesIn(root, r.base)
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
		if idx, _ := r.indexes(); len(idx) == 0 || idx[len(idx)-1] <= r.index {
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
	idx, err := r.indexes()
	if err != nil {
		return false, err
	}
	for _, i := range idx {
		if i <= r.index {
			continue
		}
		f, err := allocdir.OpenRead(r.root, r.base+"."+strconv.Itoa(i))
		if errors.Is(err, fs.ErrNotExist) {
			// Rotated away between listing and opening: try the next.
			continue
		}
		if errors.Is(err, allocdir.ErrUnsafe) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENXIO) {
			// Planted by the task (a link out, a FIFO, a hard link):
			// never read; skip to the next file.
			r.index = i
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
	idx, err := r.indexes()
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
	var err error
	if r.f != nil {
		err = r.f.Close()
		r.f = nil
	}
	if r.root != nil {
		if rerr := r.root.Close(); err == nil {
			err = rerr
		}
		r.root = nil
	}
	return err
}
