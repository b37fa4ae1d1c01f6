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
	// env and dir are the task's environment and working directory, for
	// ExecTask.
	env []string
	dir string

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
// The attribute driver.native.limits says plainly that this version does
// not enforce a task's CPU and memory (no cgroup limits yet): "none",
// with the host's cgroup version in driver.native.cgroup ("v2" when
// /sys/fs/cgroup/cgroup.controllers exists, else "v1-or-none").
func (d *Driver) Fingerprint() *structs.DriverInfo {
	cg := "v1-or-none"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		cg = "v2"
	}
	return &structs.DriverInfo{
		Detected:          true,
		Healthy:           true,
		HealthDescription: "healthy (CPU and memory limits not enforced)",
		Attributes:        map[string]string{"driver.native.version": Version, "driver.native.limits": "none", "driver.native.cgroup": cg},
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

	user := cfg.User
	if tc.User != "" {
		user = tc.User
	}
	cred, err := credential(user)
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := chownTaskDir(cfg.TaskDir, cred); err != nil {
			return nil, err
		}
	}

	d.mu.Lock()
	if _, ok := d.tasks[cfg.ID]; ok {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", driver.ErrTaskExists, cfg.ID)
	}
	// Reserve the ID while starting so a concurrent duplicate fails.
	d.tasks[cfg.ID] = nil
	d.mu.Unlock()
	release := func() {
		d.mu.Lock()
		delete(d.tasks, cfg.ID)
		d.mu.Unlock()
	}
	envl := envList(env)
	var t *task
	if cfg.LogDir != "" {
		t, err = d.startWithShim(cfg, tc, path, envl, cred)
	} else {
		t, err = d.startDirect(cfg, tc, path, envl, cred)
	}
	if err != nil {
		release()
		return nil, err
	}
	t.env, t.dir = envl, cfg.TaskDir
	d.mu.Lock()
	d.tasks[cfg.ID] = t
	d.mu.Unlock()
	d.logger.Debug("task started", "task_id", cfg.ID, "pid", t.pid, "shim_pid", t.handle.ShimPID, "command", tc.Command)
	c := *t.handle
	return &c, nil
}

// startDirect runs the task as the agent's own child with its output
// copied to cfg.Stdout and cfg.Stderr. Such a task cannot outlive the
// agent's death with its output intact; the client uses the shim.
func (d *Driver) startDirect(cfg *driver.TaskConfig, tc *taskConfig, path string, env []string, cred *syscall.Credential) (*task, error) {
	cmd := exec.Command(path, tc.Args...)
	cmd.Args[0] = tc.Command
	cmd.Dir = cfg.TaskDir
	cmd.Env = env
	cmd.Stdout = writerOrDiscard(cfg.Stdout)
	cmd.Stderr = writerOrDiscard(cfg.Stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	cmd.WaitDelay = ioWaitDelay
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start command %q: %w", tc.Command, err)
	}
	pid := cmd.Process.Pid
	startTicks, _ := processStartTime(pid)
	h := &driver.TaskHandle{ID: cfg.ID, Driver: Name, PID: pid, StartTime: startTicks, StartedAt: time.Now()}
	t := &task{id: cfg.ID, name: cfg.Name, handle: h, pid: pid, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		t.finish(exitResult(cmd.ProcessState, err))
		d.logger.Debug("task exited", "task_id", cfg.ID, "pid", pid)
	}()
	return t, nil
}

// startWithShim runs the task under a shim process (see ShimEnv) that
// writes its rotated logs under cfg.LogDir and records its exit status.
func (d *Driver) startWithShim(cfg *driver.TaskConfig, tc *taskConfig, path string, env []string, cred *syscall.Credential) (*task, error) {
	spec := &shimSpec{
		Path:       path,
		Args:       append([]string{tc.Command}, tc.Args...),
		Dir:        cfg.TaskDir,
		Env:        env,
		LogDir:     cfg.LogDir,
		StdoutBase: cfg.Name + ".stdout",
		StderrBase: cfg.Name + ".stderr",
		MaxSize:    cfg.LogMaxFileSize,
		MaxFiles:   cfg.LogMaxFiles,
	}
	if spec.MaxSize <= 0 {
		spec.MaxSize = 10 << 20
	}
	if spec.MaxFiles <= 0 {
		spec.MaxFiles = 10
	}
	if cred != nil {
		spec.UID, spec.GID = &cred.Uid, &cred.Gid
	}
	shim, pid, err := startShim(cfg, spec)
	if err != nil {
		return nil, fmt.Errorf("start command %q: %w", tc.Command, err)
	}
	startTicks, _ := processStartTime(pid)
	shimTicks, _ := processStartTime(shim.Process.Pid)
	h := &driver.TaskHandle{ID: cfg.ID, Driver: Name, PID: pid, StartTime: startTicks, StartedAt: time.Now(),
		ShimPID: shim.Process.Pid, ShimStartTime: shimTicks}
	t := &task{id: cfg.ID, name: cfg.Name, handle: h, pid: pid, done: make(chan struct{})}
	_, exitPath := shimPaths(cfg)
	go func() {
		werr := shim.Wait()
		t.finish(shimResult(exitPath, werr))
		d.logger.Debug("task exited", "task_id", cfg.ID, "pid", pid)
	}()
	return t, nil
}

// shimResult reads the exit status the shim recorded; a shim that died
// without recording one gives an ExitResult with Err set.
func shimResult(exitPath string, shimErr error) *driver.ExitResult {
	r, _, err := readExitFile(exitPath)
	if err == nil {
		return r
	}
	return &driver.ExitResult{ExitCode: -1, Err: fmt.Errorf("task shim ended without recording an exit status (shim: %v): %w", shimErr, err)}
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
	return driver.WaitDone(ctx, t.done, func() *driver.ExitResult {
		r, _ := t.exit()
		return r
	}), nil
}

// StopTask sends signal (default SIGTERM) to the task's process group,
// waits up to timeout (default 5 seconds) for the task to exit, then sends
// SIGKILL to the group. Any process left in the group after the leader
// exited is killed too. An unknown signal name is logged and replaced by
// SIGKILL, so a stop always ends the task. It returns
// driver.ErrTaskNotFound for an unknown ID.
func (d *Driver) StopTask(taskID string, timeout time.Duration, signal string) error {
	t, err := d.lookup(taskID)
	if err != nil {
		return err
	}
	sig, err := parseSignal(signal)
	if err != nil {
		d.logger.Warn("unknown kill signal, killing the task instead", "task_id", taskID, "error", err)
		sig = syscall.SIGKILL
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

// RecoverTask tracks again a task started before a client restart, so
// StopTask, WaitTask and InspectTask work. A task started under the shim
// (h.ShimPID set) is found by the shim's pid and start time; if the shim
// is gone, the exit status it recorded under cfg.LogDir makes the task
// known as exited with that status. A task started directly is found by
// its own pid and start time in /proc/<pid>/stat; its exit code cannot be
// read (it is not our child), so its ExitResult has ExitCode -1 and Err
// set. It returns driver.ErrTaskNotFound if the task is gone without a
// recorded status, or its pid now belongs to another process.
func (d *Driver) RecoverTask(h *driver.TaskHandle, cfg *driver.TaskConfig) error {
	if h == nil || h.PID <= 0 {
		return fmt.Errorf("%w: handle without a pid", driver.ErrTaskNotFound)
	}
	d.mu.Lock()
	if t := d.tasks[h.ID]; t != nil {
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	hc := *h
	t := &task{id: h.ID, handle: &hc, pid: h.PID, done: make(chan struct{})}
	if cfg != nil {
		t.name, t.dir = cfg.Name, cfg.TaskDir
		t.env = envList(cfg.Env)
	}
	watchPID, watchTicks := h.PID, h.StartTime
	var exitPath string
	if h.ShimPID > 0 {
		if cfg == nil || cfg.LogDir == "" {
			return fmt.Errorf("%w: a shim task needs its log directory to recover", driver.ErrTaskNotFound)
		}
		_, exitPath = shimPaths(cfg)
		watchPID, watchTicks = h.ShimPID, h.ShimStartTime
		if sameProcess(watchPID, watchTicks) != nil {
			r, at, err := readExitFile(exitPath)
			if err != nil {
				return fmt.Errorf("%w: shim pid %d is gone and left no exit status: %v", driver.ErrTaskNotFound, h.ShimPID, err)
			}
			t.result, t.completedAt = r, at
			close(t.done)
			d.track(t)
			return nil
		}
	} else if err := sameProcess(h.PID, h.StartTime); err != nil {
		return err
	}
	if !d.track(t) {
		return nil
	}
	go func() {
		tick := time.NewTicker(recoverPollInterval)
		defer tick.Stop()
		for range tick.C {
			if sameProcess(watchPID, watchTicks) != nil {
				if exitPath != "" {
					t.finish(shimResult(exitPath, errors.New("recovered shim exited")))
				} else {
					t.finish(&driver.ExitResult{ExitCode: -1, Err: errors.New("recovered task exited; exit status unknown")})
				}
				return
			}
		}
	}()
	return nil
}

// track adds a recovered task unless one with its ID is known; it reports
// whether it added it.
func (d *Driver) track(t *task) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tasks[t.id] != nil {
		return false
	}
	d.tasks[t.id] = t
	return true
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
