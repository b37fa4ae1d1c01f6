package cgroups

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
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

// StartStopped starts cmd with its process moved into the cgroup before
// it runs its first instruction, without the calling process joining the
// cgroup. The agent's direct starts use it (tests only; see the native
// driver's startDirect). On v1 it is slower than Start, whose thread moves
// itself: each of its moves by pid waits for an RCU grace period (see
// Start).
//
// On v2 it is Start (clone3 into the cgroup). On v1 the child is started
// under ptrace (SysProcAttr.Ptrace), so the kernel stops it right after
// its execve, before the new program's first instruction; the caller
// moves it into every hierarchy's directory and detaches, and the program
// runs from there inside the cgroup. A setuid program exec'd this way
// does not gain its file's privileges (the kernel ignores set-user-ID
// bits on a traced exec). On any failure the child is killed and reaped
// and an error returned: a task never runs outside its cgroup.
func (p *Placement) StartStopped(cmd *exec.Cmd) error {
	if p.Mode != ModeV1 {
		return p.Start(cmd)
	}
	if len(p.Dirs) == 0 {
		return errors.New("cgroup v1 placement without directories")
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Ptrace = true
	// ptrace requests must come from the thread that is the tracer: the
	// one that forked the child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	kill := func(err error) error {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, syscall.WALL, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return kill(fmt.Errorf("wait for the task to stop at its exec: %w", err))
		}
		break
	}
	if !ws.Stopped() || ws.StopSignal() != syscall.SIGTRAP {
		// It exited or was killed before its first instruction, and
		// Wait4 reaped it: Wait only releases the output pipes now.
		_ = cmd.Wait()
		return fmt.Errorf("task did not stop at its exec (wait status %#x)", uint32(ws))
	}
	for _, dir := range p.Dirs {
		if err := writeValue(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			_ = syscall.PtraceDetach(pid)
			return kill(fmt.Errorf("move task into its cgroup %s: %w", dir, err))
		}
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		return kill(fmt.Errorf("let the task run in its cgroup (ptrace detach): %w", err))
	}
	return nil
}
