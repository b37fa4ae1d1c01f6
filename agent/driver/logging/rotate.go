// Package logging writes a task's stdout and stderr to size-rotated files
// that are cut only at line ends. The client's task runner and the native
// driver's task shim (which outlives a client restart) both use it.
package logging

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
)

// RotatingWriter writes a task's stdout or stderr to dir/<base>.<n> and
// starts file n+1 once file n reaches maxSize bytes, keeping the newest
// maxFiles files.
//
// Files are cut at a line end: a line in progress when the limit is passed
// is finished in the same file (so a file may grow to under 2 × maxSize),
// and only a line longer than maxSize by itself is cut, after maxSize bytes.
//
// Every file is opened beneath the log directory's os.Root with the
// checks of package allocdir: a file the task replaced with a symlink, a
// hard link or anything but the agent's own regular file is never written
// through; the writer removes the name and starts that file afresh.
type RotatingWriter struct {
	root     *os.Root
	base     string // "<task>.stdout"
	maxSize  int64
	maxFiles int

	mu        sync.Mutex
	f         *os.File
	index     int
	size      int64
	lineStart int64 // offset in the current file where the unfinished line began
	closed    bool
}

// NewRotatingWriter opens (or continues, after a task restart) the newest
// file of dir/base.*, with dir opened by path: use NewRotatingWriterIn for
// a directory a task can change.
func NewRotatingWriter(dir, base string, maxSize int64, maxFiles int) (*RotatingWriter, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open log directory: %w", err)
	}
	w, err := NewRotatingWriterIn(root, base, maxSize, maxFiles)
	if err != nil {
		root.Close()
		return nil, err
	}
	return w, nil
}

// NewRotatingWriterIn opens (or continues, after a task restart) the
// newest file base.<n> of the log directory root. On success the writer
// owns root (Close closes it); on an error the caller still does. A
// newest file that fails allocdir's checks (a symlink, a hard link, not
// the agent's) is not continued: the writer starts the next index.
func NewRotatingWriterIn(root *os.Root, base string, maxSize int64, maxFiles int) (*RotatingWriter, error) {
	if maxSize <= 0 || maxFiles <= 0 {
		return nil, fmt.Errorf("log rotation needs a positive size and file count, got %d bytes and %d files", maxSize, maxFiles)
	}
	w := &RotatingWriter{root: root, base: base, maxSize: maxSize, maxFiles: maxFiles}
	idx, err := IndexesIn(root, base)
	if err != nil {
		return nil, err
	}
	if len(idx) > 0 {
		w.index = idx[len(idx)-1]
		f, err := allocdir.OpenAppend(root, w.name(w.index))
		if err == nil {
			if err := w.use(f); err != nil {
				return nil, err
			}
			return w, nil
		}
		// Not ours to continue (refused or gone): start the next file.
		w.index++
	}
	if err := w.create(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *RotatingWriter) name(i int) string { return w.base + "." + strconv.Itoa(i) }

func (w *RotatingWriter) use(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat log file: %w", err)
	}
	w.f, w.size, w.lineStart = f, fi.Size(), fi.Size()
	return nil
}

// create starts file w.index afresh: whatever a task left under its name
// is removed, never followed.
func (w *RotatingWriter) create() error {
	f, err := allocdir.CreateFresh(w.root, w.name(w.index), 0o640)
	if err != nil {
		return fmt.Errorf("create log file: %w", err)
	}
	return w.use(f)
}

func (w *RotatingWriter) rotate() error {
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("close log file: %w", err)
	}
	w.index++
	if err := w.create(); err != nil {
		return err
	}
	if old := w.index - w.maxFiles; old >= 0 {
		idx, err := IndexesIn(w.root, w.base)
		if err != nil {
			return err
		}
		for _, i := range idx {
			if i <= old {
				// Remove unlinks the name; a symlink's target is untouched.
				_ = w.root.Remove(w.name(i))
			}
		}
	}
	return nil
}

func (w *RotatingWriter) write(p []byte) error {
	n, err := w.f.Write(p)
	w.size += int64(n)
	if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
		w.lineStart = w.size - int64(n-i-1)
	}
	return err
}

// Write implements io.Writer. It never returns a short write without an
// error.
func (w *RotatingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, fs.ErrClosed
	}
	total := len(p)
	for len(p) > 0 {
		room := w.maxSize - w.size
		if int64(len(p)) <= room {
			return total, w.write(p)
		}
		// Cut after the last line end that still fits.
		if room > 0 {
			if i := bytes.LastIndexByte(p[:room], '\n'); i >= 0 {
				if err := w.write(p[:i+1]); err != nil {
					return total - len(p), err
				}
				p = p[i+1:]
				if err := w.rotate(); err != nil {
					return total - len(p), err
				}
				continue
			}
		}
		cur := w.size - w.lineStart // bytes of the unfinished line already in this file
		if cur == 0 {
			if w.size > 0 {
				// At a line end: start the next line in a fresh file.
				if err := w.rotate(); err != nil {
					return total - len(p), err
				}
				continue
			}
			// A fresh file and a line longer than the limit: cut it.
			if err := w.write(p[:w.maxSize]); err != nil {
				return total - len(p), err
			}
			p = p[w.maxSize:]
			w.lineStart = w.size
			if err := w.rotate(); err != nil {
				return total - len(p), err
			}
			continue
		}
		// A line is in progress: finish it here if the whole line fits the
		// limit, else cut it at the limit.
		j := bytes.IndexByte(p, '\n')
		switch {
		case j >= 0 && cur+int64(j)+1 <= w.maxSize:
			if err := w.write(p[:j+1]); err != nil {
				return total - len(p), err
			}
			p = p[j+1:]
		case j < 0 && cur+int64(len(p)) <= w.maxSize:
			return total, w.write(p)
		default:
			n := w.maxSize - cur
			if n > 0 {
				if err := w.write(p[:n]); err != nil {
					return total - len(p), err
				}
				p = p[n:]
			}
			w.lineStart = w.size
		}
		if err := w.rotate(); err != nil {
			return total - len(p), err
		}
	}
	return total, nil
}

// Index returns the rotation index of the file being written.
func (w *RotatingWriter) Index() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.index
}

// Close closes the current file and the log directory.
func (w *RotatingWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.f.Close()
	if rerr := w.root.Close(); err == nil {
		err = rerr
	}
	return err
}

// Indexes returns the rotation indexes of dir/base.<n>, ascending, with
// dir opened by path (IndexesIn for a directory a task can change).
func Indexes(dir, base string) ([]int, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list log files: %w", err)
	}
	defer root.Close()
	return IndexesIn(root, base)
}

// IndexesIn returns the rotation indexes of base.<n> in the directory
// root, ascending.
func IndexesIn(root *os.Root, base string) ([]int, error) {
	names, err := allocdir.Names(root)
	if err != nil {
		return nil, fmt.Errorf("list log files: %w", err)
	}
	var idx []int
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, base+".")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			continue
		}
		idx = append(idx, n)
	}
	sort.Ints(idx)
	return idx, nil
}
