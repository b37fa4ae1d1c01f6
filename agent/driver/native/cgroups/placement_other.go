//go:build !linux

package cgroups

import (
	"fmt"
	"os/exec"
)

// startInto fails: cgroups exist only on Linux.
func startInto(_ *exec.Cmd, dir string) error {
	return fmt.Errorf("%w: cannot start into cgroup %s off Linux", ErrUnsupported, dir)
}

// StartStopped fails: cgroups exist only on Linux.
func (p *Placement) StartStopped(_ *exec.Cmd) error {
	return fmt.Errorf("%w: cannot start into a cgroup off Linux", ErrUnsupported)
}
