package native

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/gpulayer/gpulayer/agent/driver"
)

var _ driver.GoneProver = (*Driver)(nil)

// TaskGone implements driver.GoneProver: it returns nil when no process is
// left in the task's process group (kill(-pgid, 0) answers ESRCH; the task
// leads its group, so the pgid is h.PID), and an error naming the group
// otherwise. Processes that left the group (setsid) are the cgroup's to
// catch: StopTask and DestroyTask kill every process in it.
func (d *Driver) TaskGone(h *driver.TaskHandle) error {
	if h == nil || h.PID <= 0 {
		return fmt.Errorf("handle without a pid: cannot prove the task is gone")
	}
	if h.PID == 1 {
		return fmt.Errorf("refusing to probe process group 1")
	}
	err := syscall.Kill(-h.PID, 0)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return nil
	case err == nil, errors.Is(err, syscall.EPERM):
		return fmt.Errorf("process group %d still has processes", h.PID)
	default:
		return fmt.Errorf("probe process group %d: %w", h.PID, err)
	}
}
