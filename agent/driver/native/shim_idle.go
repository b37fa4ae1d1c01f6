package native

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gpulayer/gpulayer/agent/driver/native/shim"
)

// idleShim is a task shim started before its task is known: its own
// session, this binary with shim.Env set, blocked reading its spec on
// shim.SpecFD. Starting it (exec, the Go runtime, package initialisation:
// about 3 ms, more on a loaded host) is what dominated a native task's
// start, so the driver keeps one ready (takeShim) and a task's start only
// hands it the spec. Nothing in it depends on the task: the spec carries
// the command, user, cgroup and log files. If the agent dies, the idle
// shim reads end of file, fails to decode an empty spec and exits; tasks
// started earlier have shims of their own and are not affected, so
// reattach after kill -9 works as before.
type idleShim struct {
	cmd *exec.Cmd
	// status is the read end of the shim's status pipe (shim.StatusFD),
	// spec the write end of its spec pipe (shim.SpecFD).
	status *os.File
	spec   *os.File
}

// launchShim starts a shim that waits for its spec.
func launchShim() (*idleShim, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the task shim: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("shim status pipe: %w", err)
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("shim spec pipe: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{shim.Env + "=1"}
	// Not the log directory: a path there could lead anywhere.
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{w, specR} // shim.StatusFD, shim.SpecFD
	// A session of its own: the agent's death, or a signal to the agent's
	// process group, does not reach the shim or the task.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	specR.Close()
	if err != nil {
		r.Close()
		specW.Close()
		return nil, fmt.Errorf("start task shim: %w", err)
	}
	return &idleShim{cmd: cmd, status: r, spec: specW}, nil
}

// alive reports whether the shim still waits for its spec: nothing killed
// it meanwhile. A shim that died closed its end of the status pipe, which
// then polls as readable (end of file) or hung up; a waiting one has
// written nothing. (A signal 0 would not tell: a killed shim stays a
// zombie until reaped.)
func (s *idleShim) alive() bool {
	rc, err := s.status.SyscallConn()
	if err != nil {
		return false
	}
	waiting := false
	cerr := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		waiting = err == nil && n == 0
	})
	return cerr == nil && waiting
}

// discard stops a shim that will get no spec and reaps it.
func (s *idleShim) discard() {
	s.spec.Close()
	s.status.Close()
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// takeShim returns the driver's idle shim, or a newly started one when
// there is none (the first task, or several starting at once). The caller
// has a replacement started (refillShim) once its task runs: a shim's
// start is an exec and the Go runtime's start, CPU that on a small host
// the task's own start would otherwise wait behind.
func (d *Driver) takeShim() (*idleShim, error) {
	d.shimMu.Lock()
	sh := d.idle
	d.idle = nil
	d.shimMu.Unlock()
	if sh != nil && !sh.alive() {
		sh.discard()
		sh = nil
	}
	if sh != nil {
		return sh, nil
	}
	return launchShim()
}

// refillShim starts an idle shim unless the driver has one or is closed.
func (d *Driver) refillShim() {
	d.shimMu.Lock()
	if d.idle != nil || d.closed || d.refilling {
		d.shimMu.Unlock()
		return
	}
	d.refilling = true
	d.shimMu.Unlock()
	sh, err := launchShim()
	d.shimMu.Lock()
	d.refilling = false
	if err != nil || d.closed || d.idle != nil {
		d.shimMu.Unlock()
		if err != nil {
			d.logger.Debug("start an idle task shim", "error", err)
		} else {
			sh.discard()
		}
		return
	}
	d.idle = sh
	d.shimMu.Unlock()
}

// Close stops the driver's idle shim. Running tasks and their shims are
// not affected; a later StartTask starts its shim itself.
func (d *Driver) Close() error {
	d.shimMu.Lock()
	sh := d.idle
	d.idle, d.closed = nil, true
	d.shimMu.Unlock()
	if sh != nil {
		sh.discard()
	}
	return nil
}
