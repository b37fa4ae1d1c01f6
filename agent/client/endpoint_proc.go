package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procStatusLimit bounds what is read of /proc/<pid>/status (a few KiB in
// practice).
const procStatusLimit = 64 << 10

// errNoProc is returned by readProcess where /proc cannot be read.
var errNoProc = errors.New("/proc is not available")

// readProcess reads, at the time of the call, whether pid lives (it exists
// and its State in /proc/<pid>/status is neither Z, zombie, nor X, dead)
// and its resident set size (VmRSS, kB in the file) in MiB. A pid that
// does not exist is not alive, without an error. Where /proc is missing
// it answers from kill(pid, 0) with the RSS unknown and errNoProc.
func readProcess(pid int) (alive bool, rssMiB float64, err error) {
	if pid <= 0 {
		return false, 0, fmt.Errorf("no pid")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat("/proc/self/status"); serr != nil {
				kerr := syscall.Kill(pid, 0)
				return kerr == nil || errors.Is(kerr, syscall.EPERM), 0, errNoProc
			}
			return false, 0, nil
		}
		return false, 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, procStatusLimit))
	if err != nil {
		// ESRCH while reading: the process ended.
		if errors.Is(err, syscall.ESRCH) {
			return false, 0, nil
		}
		return false, 0, err
	}
	return parseProcStatus(b)
}

// parseProcStatus reads State and VmRSS from the text of a
// /proc/<pid>/status file (proc(5)).
func parseProcStatus(b []byte) (alive bool, rssMiB float64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	var state string
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			state = v
		case "VmRSS":
			f := strings.Fields(v)
			if len(f) == 0 {
				return false, 0, fmt.Errorf("VmRSS %q: no value", v)
			}
			kb, perr := strconv.ParseUint(f[0], 10, 64)
			if perr != nil {
				return false, 0, fmt.Errorf("VmRSS %q: %w", v, perr)
			}
			rssMiB = float64(kb) / 1024
		}
	}
	if state == "" {
		return false, 0, fmt.Errorf("no State line")
	}
	alive = state[0] != 'Z' && state[0] != 'X'
	return alive, rssMiB, nil
}
