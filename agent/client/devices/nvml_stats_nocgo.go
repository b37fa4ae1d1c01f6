//go:build !cgo || !linux

package devices

import "fmt"

// Usage is one device's NVML utilisation and memory reading.
type Usage struct {
	UtilizationPercent float64
	MemoryUsedMiB      int64
	MemoryTotalMiB     int64
}

// SampleNVML always fails in a build without cgo or off Linux; the error
// wraps ErrUnavailable.
func SampleNVML(uuids []string) (map[string]Usage, map[string]error, error) {
	return nil, nil, fmt.Errorf("%w: NVML unavailable in this build", ErrUnavailable)
}
