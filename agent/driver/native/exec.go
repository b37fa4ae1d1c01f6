package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/creack/pty"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
)

var (
	_ driver.Signaler      = (*Driver)(nil)
	_ driver.Execer        = (*Driver)(nil)
	_ driver.LogFileWriter = (*Driver)(nil)
)

// WritesLogFiles reports true: given a TaskConfig.LogDir, the task's shim
// writes the rotated log files.
func (d *Driver) WritesLogFiles() bool { return true }

// taskDirMode is the mode of a task directory whose task runs as another
// user: owned by the agent (root) with the task's primary group, group
// members may create files (the task's working directory), and the sticky
// bit keeps them from renaming or removing an entry they do not own (the
// agent's logs directory). Others may not even pass.
const taskDirMode = fs.ModeSticky | 0o770

// chownTaskDir readies a task directory for a task running as cred: the
// directory itself stays the agent's, group cred.Gid, mode taskDirMode;
// its local, secrets and outputs directories are given to the task's
// user. The logs directory stays the agent's (mode 0700): the task can
// neither write there nor, thanks to the sticky bit, rename it away.
//
// Each directory is opened beneath the allocation directory without
// following any symlink (allocdir.OpenDir, O_DIRECTORY|O_NOFOLLOW on each
// component) and changed through its descriptor, so nothing a task
// planted there (a symlink to a host directory or to "..", a hard link to
// a host file where secrets was) changes owner. A name that is not a
// directory fails the start with an error wrapping driver.ErrInvalidConfig
// and allocdir.ErrUnsafe, naming it; a missing one is skipped.
func chownTaskDir(dir string, cred *syscall.Credential) error {
	// The user must be able to reach the directory: every directory above
	// it needs search permission for that user. The driver does not widen
	// the client's data directory (mode 0700 by default) on its own.
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			mode := fi.Mode().Perm()
			can := mode&0o001 != 0 || (st.Uid == cred.Uid && mode&0o100 != 0) || (st.Gid == cred.Gid && mode&0o010 != 0)
			if !can {
				return fmt.Errorf("%w: the task's user (uid %d) cannot enter %s (mode %s): make the client's data directory searchable by it (chmod o+x on each directory down to the allocations) to run tasks as another user",
					driver.ErrInvalidConfig, cred.Uid, p, mode)
			}
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	allocDir, name := filepath.Dir(dir), filepath.Base(dir)
	td, err := allocdir.OpenDir(allocDir, name)
	if err != nil {
		return refuseDir(err, dir, cred)
	}
	// Owner first, mode second: a chown may clear mode bits (setgid on
	// some systems), so the mode is set last.
	err = td.Chown(os.Geteuid(), int(cred.Gid))
	if err == nil {
		err = td.Chmod(taskDirMode)
	}
	td.Close()
	if err != nil {
		return fmt.Errorf("ready task directory %s for gid %d: %w", dir, cred.Gid, err)
	}
	for _, sub := range []string{"local", "secrets", "outputs"} {
		err := allocdir.ChownDir(allocDir, name+"/"+sub, int(cred.Uid), int(cred.Gid))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return refuseDir(err, filepath.Join(dir, sub), cred)
		}
	}
	return nil
}

// refuseDir is chownTaskDir's error for the directory path.
func refuseDir(err error, path string, cred *syscall.Credential) error {
	if errors.Is(err, allocdir.ErrUnsafe) {
		return fmt.Errorf("%w: not giving %s to the task's user (uid %d), it may be a link to a host file: %w; remove it or run the allocation afresh",
			driver.ErrInvalidConfig, path, cred.Uid, err)
	}
	return fmt.Errorf("give task directory %s to uid %d: %w", path, cred.Uid, err)
}

// SignalTask sends signal to the task's process group. It returns
// driver.ErrTaskNotFound for an unknown or exited task and an error
// wrapping driver.ErrInvalidConfig for an unknown signal.
func (d *Driver) SignalTask(taskID, signal string) error {
	t, err := d.lookup(taskID)
	if err != nil {
		return err
	}
	if signal == "" {
		return fmt.Errorf("%w: no signal named", driver.ErrInvalidConfig)
	}
	sig, err := parseSignal(signal)
	if err != nil {
		return err
	}
	select {
	case <-t.done:
		return fmt.Errorf("%w: task %s has exited", driver.ErrTaskNotFound, taskID)
	default:
	}
	return killGroup(t.pid, sig)
}

// ExecTask runs opts.Cmd with the task's environment in its working
// directory, as the task's user, and returns its exit code (-1 with an
// error when it could not run, 128+n when killed by signal n). With
// opts.Tty it runs on a pseudo-terminal whose output goes to opts.Stdout.
// It returns driver.ErrTaskNotFound for an unknown or exited task and an
// error wrapping driver.ErrInvalidConfig for an empty command.
func (d *Driver) ExecTask(ctx context.Context, taskID string, opts *driver.ExecOptions) (int, error) {
	t, err := d.lookup(taskID)
	if err != nil {
		return -1, err
	}
	select {
	case <-t.done:
		return -1, fmt.Errorf("%w: task %s has exited", driver.ErrTaskNotFound, taskID)
	default:
	}
	if opts == nil || len(opts.Cmd) == 0 || opts.Cmd[0] == "" {
		return -1, fmt.Errorf("%w: exec needs a command", driver.ErrInvalidConfig)
	}
	envPath := DefaultPath
	for _, kv := range t.env {
		if v, ok := cutEnv(kv, "PATH"); ok {
			envPath = v
		}
	}
	path, err := resolveCommand(opts.Cmd[0], t.dir, envPath)
	if err != nil {
		return -1, err
	}
	cmd := exec.CommandContext(ctx, path, opts.Cmd[1:]...)
	cmd.Args[0] = opts.Cmd[0]
	cmd.Dir = t.dir
	cmd.Env = t.env
	// As the task's user, never the agent's: exec must not be a way
	// around the user policy.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: t.cred}
	if opts.Tty {
		f, err := pty.Start(cmd)
		if err != nil {
			return -1, fmt.Errorf("exec %q on a tty: %w", opts.Cmd[0], err)
		}
		defer f.Close()
		if opts.Stdin != nil {
			go func() { _, _ = io.Copy(f, opts.Stdin) }()
		}
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			// EIO once the command exits and the tty closes.
			_, _ = io.Copy(writerOrDiscard(opts.Stdout), f)
		}()
		werr := cmd.Wait()
		<-copied
		return execExitCode(cmd, werr)
	}
	cmd.Stdin = opts.Stdin
	cmd.Stdout = writerOrDiscard(opts.Stdout)
	cmd.Stderr = writerOrDiscard(opts.Stderr)
	cmd.WaitDelay = ioWaitDelay
	return execExitCode(cmd, cmd.Run())
}

func cutEnv(kv, key string) (string, bool) {
	if len(kv) > len(key) && kv[:len(key)] == key && kv[len(key)] == '=' {
		return kv[len(key)+1:], true
	}
	return "", false
}

func execExitCode(cmd *exec.Cmd, err error) (int, error) {
	if cmd.ProcessState != nil {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return cmd.ProcessState.ExitCode(), nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return -1, fmt.Errorf("exec %q: %w", cmd.Args[0], err)
}
