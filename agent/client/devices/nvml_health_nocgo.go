//go:build !cgo || !linux

package devices

import "fmt"

// NewNVMLHealth always fails in a build without cgo or off Linux: go-nvml
// needs cgo. The error wraps ErrUnavailable.
func NewNVMLHealth(cfg NVMLHealthConfig) (HealthSource, error) {
	return nil, fmt.Errorf("%w: NVML unavailable in this build", ErrUnavailable)
}
