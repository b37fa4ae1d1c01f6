//go:build !(darwin && arm64)

package devices

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// DetectApple reports ErrUnavailable: the host is not Apple Silicon.
func DetectApple() ([]*structs.DeviceGroup, error) {
	return nil, fmt.Errorf("%w: not an Apple Silicon host", ErrUnavailable)
}
