//go:build !cgo || !linux

package devices

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// Detect always fails in a build without cgo or off Linux: go-nvml needs
// cgo. The error wraps ErrUnavailable.
func Detect() ([]*structs.DeviceGroup, error) {
	return nil, fmt.Errorf("%w: NVML unavailable in this build", ErrUnavailable)
}
