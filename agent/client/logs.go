package client

import (
	"os"

	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/agent/driver/logging"
)

// rotatingWriter is the task log writer: size-rotated files cut at line
// ends (see logging.RotatingWriter).
type rotatingWriter = logging.RotatingWriter

// newRotatingWriter opens (or continues) dir/base.<n> with dir opened by
// path (tests); see logging.NewRotatingWriter.
func newRotatingWriter(dir, base string, maxSize int64, maxFiles int) (*rotatingWriter, error) {
	return logging.NewRotatingWriter(dir, base, maxSize, maxFiles)
}

// newTaskLogWriter opens (or continues) logDir/base.<n>, with logDir
// opened beneath the allocation directory allocDir (package allocdir), so
// nothing a task plants in its directories is followed out of it.
func newTaskLogWriter(allocDir, logDir, base string, maxSize int64, maxFiles int) (*rotatingWriter, error) {
	root, err := allocdir.OpenBeneath(allocDir, logDir)
	if err != nil {
		return nil, err
	}
	w, err := logging.NewRotatingWriterIn(root, base, maxSize, maxFiles)
	if err != nil {
		root.Close()
		return nil, err
	}
	return w, nil
}

// logIndexes returns the rotation indexes of dir/base.<n>, ascending.
func logIndexes(dir, base string) ([]int, error) { return logging.Indexes(dir, base) }

// logIndexesIn returns the rotation indexes of base.<n> in root, ascending.
func logIndexesIn(root *os.Root, base string) ([]int, error) { return logging.IndexesIn(root, base) }
