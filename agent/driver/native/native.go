// Package native runs tasks as plain host processes, each in its own
// session and process group so a stop reaches every child it started.
package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// Name is the driver's name in task specs.
const Name = "native"

// Version is reported as the "driver.native.version" attribute.
const Version = "0.1.0"

// ioWaitDelay bounds how long a finished task's output is still copied when
// a process it left behind holds its stdout or stderr open.
const ioWaitDelay = 2 * time.Second

// recoverPollInterval is how often a recovered (not our child) process is
// checked for exit.
const recoverPollInterval = 250 * time.Millisecond

// Driver is the native driver. Create it with New.
type Driver struct {
	logger hclog.Logger

	mu    sync.Mutex
	tasks map[string]*task
}

type task struct {
	id     string
	name   string
	handle *driver.TaskHandle
	// pid is also the process group ID (the task is a group leader).
	pid  int
	done chan struct{}

	mu          sync.Mutex
	result      *driver.ExitResult
	completedAt time.Time
}

func (t *task) finish(r *driver.ExitResult) {
	t.mu.Lock()
	t.result = r
	t.completedAt = time.Now()
	t.mu.Unlock()
	close(t.done)
}

func (t *task) exit() (*driver.ExitResult, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.result, t.completedAt
}

var _ driver.Driver = (*Driver)(nil)

// New returns a native driver. A nil logger discards logs.
func New(logger hclog.Logger) *Driver {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Driver{logger: logger.Named("native"), tasks: map[string]*task{}}
}

// Name returns "native".
func (d *Driver) Name() string { return Name }

// Fingerprint reports the driver healthy: it needs nothing but fork/exec.
func (d *Driver) Fingerprint() *structs.DriverInfo {
	return &structs.DriverInfo{
		Detected:          true,
		Healthy:           true,
		HealthDescription: "healthy",
		Attributes:        map[string]string{"driver.native.version": Version},
	}
}

// StartTask checks the config and starts the command in cfg.TaskDir with
// exactly cfg.Env (plus a default PATH when missing) in a new session. It
// returns errors wrapping driver.ErrInvalidConfig for a bad config or a
// command that is missing, a directory or not executable, and
// driver.ErrTaskExists for a duplicate ID.
func (d *Driver) StartTask(cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	if cfg == nil || cfg.ID == "" {
		return nil, fmt.Errorf("%w: task config without an ID", driver.ErrInvalidConfig)
	}
	tc, err := parseConfig(cfg.Config)
	if err != nil {
		return nil, err
	}
	env := make(map[string]string, len(cfg.Env)+1)
	for k, v := range cfg.Env {
		env[k] = v
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = DefaultPath
	}
	path, err := resolveCommand(tc.Command, cfg.TaskDir, env["PATH"])
	if err != nil {
		return nil, err
	}

	d.mu.Lock()
	if _, ok := d.tasks[cfg.ID]; ok {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", driver.ErrTaskExists, cfg.ID)
	}
	// Reserve the ID while starting so a concurrent duplicate fails.
	d.tasks[cfg.ID] = nil
	d.mu.Unlock()

	cmd := exec.Command(path, tc.Args...)
	cmd.Args[0] = tc.Command
	cmd.Dir = cfg.TaskDir
	cmd.Env = envList(env)
	cmd.Stdout = writerOrDiscard(cfg.Stdout)
	cmd.Stderr = writerOrDiscard(cfg.Stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.WaitDelay = ioWaitDelay
	if err := cmd.Start(); err != nil {
		d.mu.Lock()
		delete(d.tasks, cfg.ID)
		d.mu.Unlock()
		return nil, fmt.Errorf("start command %q: %w", tc.Command, err)
	}
	pid := cmd.Process.Pid
	startTicks, _ := processStartTime(pid)
	h := &driver.TaskHandle{ID: cfg.ID, Driver: Name, PID: pid, StartTime: startTicks, StartedAt: time.Now()}
	t := &task{id: cfg.ID, name: cfg.Name, handle: h, pid: pid, done: make(chan struct{})}
	d.mu.Lock()
	d.tasks[cfg.ID] = t
	d.mu.Unlock()
	d.logger.Debug("task started", "task_id", cfg.ID, "pid", pid, "command", tc.Command)

	go func() {
		err := cmd.Wait()
		t.finish(exitResult(cmd.ProcessState, err))
		d.logger.Debug("task exited", "task_id", cfg.ID, "pid", pid)
	}()
	c := *h
	return &c, nil
}

func writerOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// exitResult turns a finished process state into an ExitResult. A wait
// error other than a non-zero exit (e.g. output copy cut by WaitDelay) is
// not treated as a task failure when the process state is known.
func exitResult(ps *os.ProcessState, waitErr error) *driver.ExitResult {
	if ps == nil {
		return &driver.ExitResult{ExitCode: -1, Err: fmt.Errorf("wait: %w", waitErr)}
	}
	r := &driver.ExitResult{ExitCode: ps.ExitCode()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = int(ws.Signal())
		r.ExitCode = -1
	}
	return r
}

func (d *Driver) lookup(taskID string) (*task, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tasks[taskID]
	if t == nil {
		return nil, fmt.Errorf("%w: %s", driver.ErrTaskNotFound, taskID)
	}
	return t, nil
}

// WaitTask returns a channel that gets the task's exit result once and is
// then closed; it is closed without a value if ctx ends first. Unknown IDs
// return driver.ErrTaskNotFound.
func (d *Driver) WaitTask(ctx context.Context, taskID string) (<-chan *driver.ExitResult, error) {
	t, err := d.lookup(taskID)
	if err != nil {
		return nil, err
	}
	ch := make(chan *driver.ExitResult, 1)
	go func() {
		defer close(ch)
		select {
		case <-t.done:
			r, _ := t.exit()
			ch <- r
		case <-ctx.Done():
		}
	}()
	return ch, nil
}

// StopTask sends signal (default SIGTERM) to the task's process group,
// waits up to timeout (default 5 seconds) for the task to exit, then sends
// SIGKILL to the group. Any process left in the group after the leader
// exited is killed too. It returns driver.ErrTaskNotFound for an unknown ID
// and an error wrapping driver.ErrInvalidConfig for an unknown signal.
func (d *Driver) StopTask(taskID string, timeout time.Duration, signal string) error {
	t, err := d.lookup(taskID)
	if err != nil {
		return err
	}
	sig, err := parseSignal(signal)
	if err != nil {
		return err
	}
	if timeout <= 0 {
		timeout = driver.DefaultKillTimeout
	}
	select {
	case <-t.done:
		killGroup(t.pid, syscall.SIGKILL)
		return nil
	default:
	}
	if err := killGroup(t.pid, sig); err != nil {
		d.logger.Warn("signal task group failed", "task_id", taskID, "signal", sig.String(), "error", err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-t.done:
		// Take down children the leader left behind.
		killGroup(t.pid, syscall.SIGKILL)
		return nil
	case <-timer.C:
	}
	d.logger.Debug("kill timeout passed, sending SIGKILL", "task_id", taskID, "timeout", timeout)
	if err := killGroup(t.pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill task %s: %w", taskID, err)
	}
	select {
	case <-t.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("task %s did not exit 10 seconds after SIGKILL", taskID)
	}
}

// killGroup signals the process group pgid. A group that no longer exists
// is not an error.
func killGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		return nil
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// InspectTask returns the task's status or driver.ErrTaskNotFound.
func (d *Driver) InspectTask(taskID string) (*driver.TaskStatus, error) {
	t, err := d.lookup(taskID)
	if err != nil {
		return nil, err
	}
	st := &driver.TaskStatus{ID: t.id, Name: t.name, PID: t.pid, StartedAt: t.handle.StartedAt, State: driver.TaskStateRunning}
	select {
	case <-t.done:
		r, at := t.exit()
		st.State = driver.TaskStateExited
		st.ExitResult = r
		st.CompletedAt = at
	default:
	}
	return st, nil
}

// RecoverTask checks that the handle's process still runs and is the same
// process (its start time in /proc/<pid>/stat matches), then tracks it
// again so StopTask, WaitTask and InspectTask work. Its exit code cannot be
// read (it is not our child): the ExitResult has ExitCode -1 and Err set.
// It returns driver.ErrTaskNotFound if the process is gone, a zombie, or
// its pid now belongs to another process.
func (d *Driver) RecoverTask(h *driver.TaskHandle) error {
	if h == nil || h.PID <= 0 {
		return fmt.Errorf("%w: handle without a pid", driver.ErrTaskNotFound)
	}
	if err := sameProcess(h.PID, h.StartTime); err != nil {
		return err
	}
	d.mu.Lock()
	if _, ok := d.tasks[h.ID]; ok {
		d.mu.Unlock()
		return nil
	}
	hc := *h
	t := &task{id: h.ID, handle: &hc, pid: h.PID, done: make(chan struct{})}
	d.tasks[h.ID] = t
	d.mu.Unlock()
	go func() {
		tick := time.NewTicker(recoverPollInterval)
		defer tick.Stop()
		for range tick.C {
			if sameProcess(h.PID, h.StartTime) != nil {
				t.finish(&driver.ExitResult{ExitCode: -1, Err: errors.New("recovered task exited; exit status unknown")})
				return
			}
		}
	}()
	return nil
}

// DestroyTask forgets an exited task. It returns driver.ErrTaskRunning for
// a running task and driver.ErrTaskNotFound for an unknown ID.
func (d *Driver) DestroyTask(taskID string) error {
	t, err := d.lookup(taskID)
	if err != nil {
		return err
	}
	select {
	case <-t.done:
	default:
		return fmt.Errorf("%w: %s", driver.ErrTaskRunning, taskID)
	}
	d.mu.Lock()
	delete(d.tasks, taskID)
	d.mu.Unlock()
	return nil
}
