package cgroups

import (
	"fmt"
	"os/exec"
	"syscall"
)

// startInto starts cmd with its process cloned into the v2 cgroup dir
// (clone3 with CLONE_INTO_CGROUP, Linux 5.7 and later).
func startInto(cmd *exec.Cmd, dir string) error {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	defer syscall.Close(fd)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = fd
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start into cgroup %s: %w", dir, err)
	}
	return nil
}
