package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/structs"
)

// AllocLogsTail is AllocLogs starting near the end: at the start of the
// last lines lines (when lines > 0) or the last bytes bytes (when bytes >
// 0), counted across rotated files. An unfinished last line counts as a
// line. With neither set it is AllocLogs. Errors are AllocLogs's, and
// structs.ErrInvalid for a negative count.
func (c *Client) AllocLogsTail(ctx context.Context, allocID, task, logType string, follow bool, lines int, bytes int64) (io.ReadCloser, error) {
	if lines < 0 || bytes < 0 {
		return nil, fmt.Errorf("%w: tail needs a non-negative line or byte count, got %d lines %d bytes", structs.ErrInvalid, lines, bytes)
	}
	rc, err := c.AllocLogs(ctx, allocID, task, logType, follow)
	if err != nil || (lines == 0 && bytes == 0) {
		return rc, err
	}
	r := rc.(*logReader)
	r.mu.Lock()
	root, err := r.dirRoot()
	r.mu.Unlock()
	if err != nil {
		r.Close()
		return nil, err
	}
	if root == nil {
		// No log directory yet: read from the first file that appears.
		return r, nil
	}
	idx, off, err := tailStart(root, r.base, lines, bytes)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.startIndex, r.startOffset = idx, off
	// Skip files before the start: openNext opens indexes above r.index.
	r.index = idx - 1
	return r, nil
}

// maxTailScan bounds how much of one log file tailStart reads to count
// lines, in bytes: a file is at most twice the rotation size, which the
// client's config bounds, and this caps it again.
const maxTailScan = 1 << 30

// tailStart finds where the last lines lines (or bytes bytes) of
// base.<n> in the log directory root begin: a file index and an offset in
// it. With no files it returns index -1 (read from the first file that
// appears). Files are opened with allocdir's checks; a refused file
// counts as empty.
func tailStart(root *os.Root, base string, lines int, nbytes int64) (int, int64, error) {
	idx, err := logIndexesIn(root, base)
	if err != nil || len(idx) == 0 {
		return -1, 0, err
	}
	if nbytes > 0 {
		remain := nbytes
		for k := len(idx) - 1; k >= 0; k-- {
			f, err := allocdir.OpenRead(root, base+"."+strconv.Itoa(idx[k]))
			if err != nil {
				continue
			}
			fi, err := f.Stat()
			f.Close()
			if err != nil {
				continue
			}
			if fi.Size() >= remain {
				return idx[k], fi.Size() - remain, nil
			}
			remain -= fi.Size()
		}
		return idx[0], 0, nil
	}
	// Count line ends from the end. A line end that is the file's last
	// byte ends the last line, so it opens no new one.
	need := lines
	trailing := true
	for k := len(idx) - 1; k >= 0; k-- {
		b, err := allocdir.ReadFile(root, base+"."+strconv.Itoa(idx[k]), maxTailScan)
		if err != nil {
			continue
		}
		end := len(b)
		for end > 0 {
			i := bytes.LastIndexByte(b[:end], '\n')
			if i < 0 {
				break
			}
			if trailing && i == len(b)-1 {
				// The newest data ends with a line end.
				trailing = false
				end = i
				continue
			}
			trailing = false
			need--
			if need == 0 {
				return idx[k], int64(i + 1), nil
			}
			end = i
		}
		if len(b) > 0 {
			trailing = false
		}
	}
	return idx[0], 0, nil
}
