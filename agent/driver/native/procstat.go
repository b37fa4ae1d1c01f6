package native

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"github.com/gpulayer/gpulayer/agent/driver"
)

// processStartTime returns the start time of pid in clock ticks since boot
// and its state letter, from fields 22 and 3 of /proc/<pid>/stat (proc(5)).
// The command name (field 2) may hold spaces and parentheses, so fields are
// counted after the last ')'.
func processStartTime(pid int) (uint64, error) {
	ticks, _, err := procStat(pid)
	return ticks, err
}

func procStat(pid int) (ticks uint64, state byte, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields, want at least 22", pid, len(fields)+2)
	}
	ticks, err = strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return ticks, fields[0][0], nil
}

// sameProcess returns nil when pid runs and, where /proc exists, started at
// startTicks; otherwise an error wrapping driver.ErrTaskNotFound.
func sameProcess(pid int, startTicks uint64) error {
	if runtime.GOOS != "linux" {
		p, err := os.FindProcess(pid)
		if err != nil || p.Signal(syscall.Signal(0)) != nil {
			return fmt.Errorf("%w: pid %d is gone", driver.ErrTaskNotFound, pid)
		}
		return nil
	}
	ticks, state, err := procStat(pid)
	if err != nil {
		return fmt.Errorf("%w: pid %d is gone", driver.ErrTaskNotFound, pid)
	}
	if state == 'Z' || state == 'X' {
		return fmt.Errorf("%w: pid %d has exited", driver.ErrTaskNotFound, pid)
	}
	if startTicks != 0 && ticks != startTicks {
		return fmt.Errorf("%w: pid %d was reused (start time %d, want %d)", driver.ErrTaskNotFound, pid, ticks, startTicks)
	}
	return nil
}
