//go:build darwin && arm64

package devices

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/gpulayer/gpulayer/structs"
)

// DetectApple reads the chip name and host memory through sysctl and
// returns the host's Apple Silicon GPU (see AppleGroup). It returns an
// error wrapping ErrUnavailable when sysctl cannot be read.
func DetectApple() ([]*structs.DeviceGroup, error) {
	chip, err := syscall.Sysctl("machdep.cpu.brand_string")
	if err != nil {
		return nil, fmt.Errorf("%w: sysctl machdep.cpu.brand_string: %v", ErrUnavailable, err)
	}
	raw, err := syscall.Sysctl("hw.memsize")
	if err != nil {
		return nil, fmt.Errorf("%w: sysctl hw.memsize: %v", ErrUnavailable, err)
	}
	// syscall.Sysctl returns the 8-byte value as a string, its trailing
	// NUL removed.
	b := make([]byte, 8)
	copy(b, raw)
	mem := binary.LittleEndian.Uint64(b)
	g := AppleGroup(chip, int64(mem/(1024*1024)))
	if g == nil {
		return nil, fmt.Errorf("%w: hw.memsize is 0", ErrUnavailable)
	}
	return []*structs.DeviceGroup{g}, nil
}
