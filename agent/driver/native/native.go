// Package native runs tasks as plain host processes, each in its own
// session and process group so a stop reaches every child it started, and,
// where the host allows, in a cgroup of its own (package cgroups) that
// enforces the task's memory and CPU and holds every process it starts.
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
	"github.com/gpulayer/gpulayer/agent/driver/native/cgroups"
	"github.com/gpulayer/gpulayer/agent/driver/native/shim"
	"github.com/gpulayer/gpulayer/structs"
)

// Name is the driver's name in task specs.
const Name = "native"

// Version is reported as the "driver.native.version" attribute.
const Version = "0.1.0"

// ioWaitDelay bounds how long a finished task's output is still copied when
// a process it left behind holds its stdout or stderr open.
const ioWaitDelay = shim.IOWaitDelay

// recoverPollInterval is how often a recovered (not our child) process is
// checked for exit.
const recoverPollInterval = 250 * time.Millisecond

// Driver is the native driver. Create it with New or NewWithConfig.
type Driver struct {
	logger hclog.Logger
	// cg makes the tasks' cgroups; its mode is ModeNone where the host
	// allows none, and then no limit is enforced.
	cg *cgroups.Manager
	// users is the policy for the users tasks run as.
	users UserPolicy

	mu    sync.Mutex
	tasks map[string]*task

	// shimMu guards idle, a task shim started ahead of its task
	// (shim_idle.go), refilling (one being started), closed (Close:
	// keep none) and exiting.
	shimMu    sync.Mutex
	idle      *idleShim
	refilling bool
	closed    bool
	// exiting holds, by task ID, a channel closed once the shim of the
	// task's latest run is reaped: after the task's exit, the shim still
	// writes its exit file (awaitShimExit).
	exiting map[string]chan struct{}
}

type task struct {
	id     string
	name   string
	handle *driver.TaskHandle
	// pid is also the process group ID (the task is a group leader).
	pid  int
	done chan struct{}
	// path is the resolved command (resolveCommand), for InspectTask.
	path string
	// env and dir are the task's environment and working directory, for
	// ExecTask.
	env []string
	dir string
	// cred is the task's user, nil for the agent's own: ExecTask runs
	// commands as it.
	cred *syscall.Credential
	// cg is the task's cgroup, nil when it has none (cgroups unusable, or
	// a recovered task started without one).
	cg *cgroups.Cgroup

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

// Config configures a native driver. The zero value is the default.
type Config struct {
	// Logger receives the driver's logs; nil discards them.
	Logger hclog.Logger
	// Cgroups says where to find the host's cgroups; the zero value looks
	// at /sys/fs/cgroup and puts tasks under a "gpulayer" parent cgroup.
	Cgroups cgroups.Config
	// Users says which users tasks run as when the agent runs as root;
	// the zero value runs every task as "nobody" and allows no other.
	Users UserPolicy
}

// New returns a native driver with the default Config and the given
// logger (nil discards logs).
func New(logger hclog.Logger) *Driver { return NewWithConfig(Config{Logger: logger}) }

// NewWithConfig returns a native driver. It detects once which cgroups the
// host allows (cgroups.Detect), creating the parent cgroup; a host with
// none gives a driver that enforces no limit and says so in Fingerprint.
func NewWithConfig(cfg Config) *Driver {
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	logger = logger.Named("native")
	cc := cfg.Cgroups
	if cc.Logger == nil {
		cc.Logger = logger
	}
	d := &Driver{logger: logger, cg: cgroups.Detect(cc), users: cfg.Users, tasks: map[string]*task{}, exiting: map[string]chan struct{}{}}
	if d.cg.Mode() == cgroups.ModeNone {
		logger.Info("CPU and memory limits of native tasks are not enforced", "reason", d.cg.Reason())
	}
	return d
}

// Name returns "native".
func (d *Driver) Name() string { return Name }

// Fingerprint reports the driver healthy: it needs nothing but fork/exec.
// The attribute driver.native.limits says how a task's CPU and memory are
// enforced: "cgroups-v2" or "cgroups-v1", or "none", and then the health
// description says why in plain words.
func (d *Driver) Fingerprint() *structs.DriverInfo {
	limits, desc := "none", "healthy (CPU and memory limits not enforced: "+d.cg.Reason()+")"
	switch d.cg.Mode() {
	case cgroups.ModeV2:
		limits, desc = "cgroups-v2", "healthy (CPU and memory limits enforced by cgroups v2)"
	case cgroups.ModeV1:
		limits, desc = "cgroups-v1", "healthy (CPU and memory limits enforced by cgroups v1)"
	}
	return &structs.DriverInfo{
		Detected:          true,
		Healthy:           true,
		HealthDescription: desc,
		Attributes:        map[string]string{"driver.native.version": Version, "driver.native.limits": limits},
	}
}

// StartTask checks the config and starts the command in cfg.TaskDir with
// exactly cfg.Env (plus a default PATH when missing) in a new session and,
// where cgroups are usable, in a cgroup of its own limited to
// cfg.Resources (see taskLimits). It returns errors wrapping
// driver.ErrInvalidConfig for a bad config or a command that is missing,
// a directory or not executable, driver.ErrTaskExists for a duplicate ID,
// and an error naming the cgroup file when the task's cgroup cannot be
// made (the task does not start; the driver goes on).
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

	name, err := taskUser(cfg, tc)
	if err != nil {
		return nil, err
	}
	cred, err := credentialFor(d.users, name)
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
	cg, err := d.createCgroup(cfg, tc)
	if err != nil {
		release()
		return nil, err
	}
	envl := envList(env)
	var t *task
	if cfg.LogDir != "" {
		t, err = d.startWithShim(cfg, tc, path, envl, cred, cg)
	} else {
		t, err = d.startDirect(cfg, tc, path, envl, cred, cg)
	}
	if err != nil {
		if cg != nil {
			if derr := cg.Destroy(); derr != nil {
				d.logger.Warn("remove cgroup of a task that did not start", "task_id", cfg.ID, "error", derr)
			}
		}
		release()
		return nil, err
	}
	t.env, t.dir, t.cred, t.path = envl, cfg.TaskDir, cred, path
	d.mu.Lock()
	d.tasks[cfg.ID] = t
	d.mu.Unlock()
	d.logger.Debug("task started", "task_id", cfg.ID, "pid", t.pid, "shim_pid", t.handle.ShimPID, "command", tc.Command)
	c := *t.handle
	return &c, nil
}

// createCgroup makes the task's cgroup with its limits, or returns nil
// when cgroups are unusable on this host (the task then runs unlimited, as
// Fingerprint says).
func (d *Driver) createCgroup(cfg *driver.TaskConfig, tc *taskConfig) (*cgroups.Cgroup, error) {
	if d.cg.Mode() == cgroups.ModeNone {
		if tc.CPUHardLimit {
			d.logger.Warn("cpu_hard_limit not enforced", "task_id", cfg.ID, "reason", d.cg.Reason())
		}
		return nil, nil
	}
	l, err := taskLimits(cfg, tc)
	if err != nil {
		return nil, err
	}
	cg, err := d.cg.Create(cfg.ID, l)
	if err != nil {
		return nil, fmt.Errorf("create the task's cgroup (for its CPU and memory limits): %w", err)
	}
	return cg, nil
}

// taskLimits returns the cgroup limits of a task: its memory resource
// (MiB) as a hard limit without swap, its CPU resource (MHz) as a
// relative weight (shares), and with cpu_hard_limit a cap of MHz /
// cfg.CPUMHzPerCore cores (see cgroups.TaskLimits). A task without
// resources gets no limit. cpu_hard_limit without the node's MHz per core
// or a CPU resource returns an error wrapping driver.ErrInvalidConfig.
func taskLimits(cfg *driver.TaskConfig, tc *taskConfig) (cgroups.Limits, error) {
	var cpu, mem int64
	if r := cfg.Resources; r != nil {
		cpu, mem = r.CPU, r.MemoryMB
	}
	if err := checkHardLimit(tc, cpu); err != nil {
		return cgroups.Limits{}, fmt.Errorf("%w: %w", driver.ErrInvalidConfig, err)
	}
	l, err := cgroups.TaskLimits(cpu, mem, tc.CPUHardLimit, cfg.CPUMHzPerCore)
	if err != nil {
		return cgroups.Limits{}, fmt.Errorf("%w: key \"cpu_hard_limit\": %v", driver.ErrInvalidConfig, err)
	}
	return l, nil
}

// startDirect runs the task as the agent's own child with its output
// copied to cfg.Stdout and cfg.Stderr. Such a task cannot outlive the
// agent's death with its output intact; the client uses the shim. The
// task is inside its cgroup before its first instruction, so neither it
// nor a child it forks at once ever runs outside (see
// cgroups.Placement.StartStopped: cloned into it on v2; on v1, stopped at
// its exec, moved in, then let go, since the agent cannot join the
// cgroup for the fork while its other goroutines fork too). Only tests
// start tasks this way.
func (d *Driver) startDirect(cfg *driver.TaskConfig, tc *taskConfig, path string, env []string, cred *syscall.Credential, cg *cgroups.Cgroup) (*task, error) {
	cmd := exec.Command(path, tc.Args...)
	cmd.Args[0] = tc.Command
	cmd.Dir = cfg.TaskDir
	cmd.Env = env
	cmd.Stdout = writerOrDiscard(cfg.Stdout)
	cmd.Stderr = writerOrDiscard(cfg.Stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	cmd.WaitDelay = ioWaitDelay
	var err error
	if cg != nil {
		err = cg.Placement().StartStopped(cmd)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("start command %q: %w", tc.Command, err)
	}
	pid := cmd.Process.Pid
	startTicks, _ := processStartTime(pid)
	h := &driver.TaskHandle{ID: cfg.ID, Driver: Name, PID: pid, StartTime: startTicks, StartedAt: time.Now()}
	t := &task{id: cfg.ID, name: cfg.Name, handle: h, pid: pid, done: make(chan struct{}), cg: cg}
	go func() {
		err := cmd.Wait()
		t.finish(d.withOOM(t, exitResult(cmd.ProcessState, err)))
		d.logger.Debug("task exited", "task_id", cfg.ID, "pid", pid)
	}()
	return t, nil
}

// withOOM marks r OOMKilled when the kernel's OOM killer killed a process
// of the task's cgroup, and returns it.
func (d *Driver) withOOM(t *task, r *driver.ExitResult) *driver.ExitResult {
	if t.cg == nil || r == nil {
		return r
	}
	oom, err := t.cg.OOMKilled()
	if err != nil {
		d.logger.Warn("read the task cgroup's OOM count", "task_id", t.id, "error", err)
	}
	r.OOMKilled = oom
	return r
}

// startWithShim runs the task under a shim process (package shim) that
// writes its rotated logs under cfg.LogDir and records its exit status.
func (d *Driver) startWithShim(cfg *driver.TaskConfig, tc *taskConfig, path string, env []string, cred *syscall.Credential, cg *cgroups.Cgroup) (*task, error) {
	spec := &shim.Spec{
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
		spec.UID, spec.GID, spec.Groups = &cred.Uid, &cred.Gid, cred.Groups
	}
	if cg != nil {
		spec.Cgroup = cg.Placement()
	}
	d.awaitShimExit(cfg.ID)
	sh, err := d.takeShim()
	if err != nil {
		return nil, fmt.Errorf("start command %q: %w", tc.Command, err)
	}
	rs, pid, err := startShim(cfg, spec, sh)
	go d.refillShim()
	if err != nil {
		return nil, fmt.Errorf("start command %q: %w", tc.Command, err)
	}
	startTicks, _ := processStartTime(pid)
	shimPID := rs.cmd.Process.Pid
	shimTicks, _ := processStartTime(shimPID)
	h := &driver.TaskHandle{ID: cfg.ID, Driver: Name, PID: pid, StartTime: startTicks, StartedAt: time.Now(),
		ShimPID: shimPID, ShimStartTime: shimTicks}
	t := &task{id: cfg.ID, name: cfg.Name, handle: h, pid: pid, done: make(chan struct{}), cg: cg}
	exitPath := shimExitPath(cfg)
	reaped := make(chan struct{})
	d.shimMu.Lock()
	d.exiting[cfg.ID] = reaped
	d.shimMu.Unlock()
	go func() {
		// The exit comes on the status pipe before the shim writes its
		// exit file durably and exits: the task is done then. A shim
		// that dies without the line leaves the file (or nothing) to read
		// once it is reaped.
		ex, ok := rs.waitExit()
		if ok {
			t.finish(d.withOOM(t, exitResultOf(ex)))
		}
		werr := rs.cmd.Wait()
		if !ok {
			t.finish(d.withOOM(t, shimResult(cfg.AllocDir(), exitPath, werr)))
		}
		d.shimMu.Lock()
		if d.exiting[cfg.ID] == reaped {
			delete(d.exiting, cfg.ID)
		}
		d.shimMu.Unlock()
		close(reaped)
		d.logger.Debug("task exited", "task_id", cfg.ID, "pid", pid)
	}()
	return t, nil
}

// exitResultOf is the ExitResult of a shim's Exit.
func exitResultOf(ex shim.Exit) *driver.ExitResult {
	r := &driver.ExitResult{ExitCode: ex.ExitCode, Signal: ex.Signal}
	if ex.Err != "" {
		r.Err = errors.New(ex.Err)
	}
	return r
}

// awaitShimExit waits, up to shimExitWait, for the shim of an earlier run
// of task id to exit, once it has reported its task's exit: it still
// writes that run's exit file, which a new run's shim must not find
// written after its start removed it.
func (d *Driver) awaitShimExit(id string) {
	d.shimMu.Lock()
	ch := d.exiting[id]
	d.shimMu.Unlock()
	if ch == nil {
		return
	}
	t := time.NewTimer(shimExitWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		d.logger.Warn("the shim of the task's previous run has not exited; starting anyway", "task_id", id, "waited", shimExitWait)
	}
}

// shimExitWait bounds awaitShimExit: a shim's exit file write and fsync,
// with room for a slow disk.
const shimExitWait = 10 * time.Second

// shimResult reads the exit status the shim recorded; a shim that died
// without recording one gives an ExitResult with Err set.
func shimResult(allocDir, exitPath string, shimErr error) *driver.ExitResult {
	r, _, err := readExitFile(allocDir, exitPath)
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
	return driver.LookupTask(&d.mu, d.tasks, taskID)
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
// exited is killed too, and so is every process left in the task's
// cgroup, which catches those that left the group (setsid, setpgid). An
// unknown signal name is logged and replaced by SIGKILL, so a stop always
// ends the task. It returns driver.ErrTaskNotFound for an unknown ID.
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
		d.killCgroup(t)
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
		d.killCgroup(t)
		return nil
	case <-timer.C:
	}
	d.logger.Debug("kill timeout passed, sending SIGKILL", "task_id", taskID, "timeout", timeout)
	if err := killGroup(t.pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill task %s: %w", taskID, err)
	}
	d.killCgroup(t)
	select {
	case <-t.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("task %s did not exit 10 seconds after SIGKILL", taskID)
	}
}

// killCgroup kills every process left in the task's cgroup, if it has
// one. A failure is logged: DestroyTask tries again.
func (d *Driver) killCgroup(t *task) {
	if t.cg == nil {
		return
	}
	if err := t.cg.Kill(); err != nil {
		d.logger.Warn("kill the processes of the task's cgroup", "task_id", t.id, "error", err)
	}
}

// killGroup signals the process group pgid. A group that no longer exists
// is not an error. Group 1 is refused: kill(-1) signals every process the
// agent may, and no task leads group 1 (init does).
func killGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		return nil
	}
	if pgid == 1 {
		return fmt.Errorf("refusing to signal process group 1: kill(-1) would reach every process")
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// InspectTask returns the task's status, with the resolved path of its
// command (TaskStatus.Executable), or driver.ErrTaskNotFound.
func (d *Driver) InspectTask(taskID string) (*driver.TaskStatus, error) {
	t, err := d.lookup(taskID)
	if err != nil {
		return nil, err
	}
	st := &driver.TaskStatus{ID: t.id, Name: t.name, PID: t.pid, StartedAt: t.handle.StartedAt, State: driver.TaskStateRunning, Executable: t.path}
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
// set. The task's cgroup, when it has one, is found again by the task's
// ID, so StopTask kills all its processes, an OOM kill is reported and
// DestroyTask removes it. It returns driver.ErrTaskNotFound if the task
// is gone without a recorded status, or its pid now belongs to another
// process.
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
	t := &task{id: h.ID, handle: &hc, pid: h.PID, done: make(chan struct{}), cg: d.openCgroup(h.ID)}
	if cfg != nil {
		t.name, t.dir = cfg.Name, cfg.TaskDir
		t.env = envList(cfg.Env)
		// The user it runs as, for ExecTask; a config that no longer
		// passes the policy leaves exec as "nobody" rather than root.
		if tc, err := parseConfig(cfg.Config); err == nil {
			pathEnv := cfg.Env["PATH"]
			if _, ok := cfg.Env["PATH"]; !ok {
				pathEnv = DefaultPath
			}
			if p, err := resolveCommand(tc.Command, cfg.TaskDir, pathEnv); err == nil {
				t.path = p
			}
			if name, err := taskUser(cfg, tc); err == nil {
				if cred, err := credentialFor(d.users, name); err == nil {
					t.cred = cred
				}
			}
		}
		if t.cred == nil && os.Geteuid() == 0 {
			t.cred, _ = lookupUser(DefaultTaskUser)
		}
	}
	watchPID, watchTicks := h.PID, h.StartTime
	var exitPath string
	if h.ShimPID > 0 {
		if cfg == nil || cfg.LogDir == "" {
			return fmt.Errorf("%w: a shim task needs its log directory to recover", driver.ErrTaskNotFound)
		}
		exitPath = shimExitPath(cfg)
		watchPID, watchTicks = h.ShimPID, h.ShimStartTime
		if sameProcess(watchPID, watchTicks) != nil {
			r, at, err := readExitFile(cfg.AllocDir(), exitPath)
			if err != nil {
				return d.lost(t, fmt.Errorf("%w: shim pid %d is gone and left no exit status: %v", driver.ErrTaskNotFound, h.ShimPID, err))
			}
			t.result, t.completedAt = d.withOOM(t, r), at
			close(t.done)
			d.track(t)
			return nil
		}
	} else if err := sameProcess(h.PID, h.StartTime); err != nil {
		return d.lost(t, err)
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
					t.finish(d.withOOM(t, shimResult(cfg.AllocDir(), exitPath, errors.New("recovered shim exited"))))
				} else {
					t.finish(d.withOOM(t, &driver.ExitResult{ExitCode: -1, Err: errors.New("recovered task exited; exit status unknown")}))
				}
				return
			}
		}
	}()
	return nil
}

// lost removes the cgroup of a task RecoverTask cannot find again (killing
// whatever it left there, as nothing will stop or destroy it) and returns
// err.
func (d *Driver) lost(t *task, err error) error {
	if t.cg != nil {
		if derr := t.cg.Destroy(); derr != nil {
			d.logger.Warn("remove cgroup of a lost task", "task_id", t.id, "error", derr)
		}
	}
	return err
}

// openCgroup returns the cgroup of a recovered task, or nil when it has
// none (cgroups unusable, or a task started by a driver without them).
func (d *Driver) openCgroup(taskID string) *cgroups.Cgroup {
	if d.cg.Mode() == cgroups.ModeNone {
		return nil
	}
	cg, err := d.cg.Open(taskID)
	if err != nil {
		d.logger.Debug("recovered task has no cgroup", "task_id", taskID, "error", err)
		return nil
	}
	return cg
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

// DestroyTask forgets an exited task, killing any process left in its
// cgroup and removing the cgroup. It returns driver.ErrTaskRunning for a
// running task, driver.ErrTaskNotFound for an unknown ID, and the error
// of the cgroup's removal (the task is forgotten all the same).
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
	// The task is done once its shim reports the exit, but the shim then
	// still writes the exit file in the task's directories: whoever
	// removes them after DestroyTask (the alloc runner's GC) must not
	// race that write.
	d.awaitShimExit(taskID)
	d.mu.Lock()
	delete(d.tasks, taskID)
	d.mu.Unlock()
	if t.cg != nil {
		if err := t.cg.Destroy(); err != nil {
			return fmt.Errorf("remove cgroup of task %s: %w", taskID, err)
		}
	}
	return nil
}
