package client

import "github.com/gpulayer/gpulayer/agent/driver/logging"

// rotatingWriter is the task log writer: size-rotated files cut at line
// ends (see logging.RotatingWriter).
type rotatingWriter = logging.RotatingWriter

// newRotatingWriter opens (or continues) dir/base.<n>; see
// logging.NewRotatingWriter.
func newRotatingWriter(dir, base string, maxSize int64, maxFiles int) (*rotatingWriter, error) {
	return logging.NewRotatingWriter(dir, base, maxSize, maxFiles)
}

// logIndexes returns the rotation indexes of dir/base.<n>, ascending.
func logIndexes(dir, base string) ([]int, error) { return logging.Indexes(dir, base) }
