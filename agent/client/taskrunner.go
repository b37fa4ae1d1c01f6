package client

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/structs"
)

// Sub-directories of every task directory.
var taskSubdirs = []string{"local", "secrets", "logs", "outputs"}

// taskRunnerConfig is everything a task runner needs from its client and
// alloc runner, given once at construction so that the task runner never
// reaches into either.
type taskRunnerConfig struct {
	// Alloc is the allocation the task belongs to; read only.
	Alloc *structs.Allocation
	// AllocDir is the allocation directory; the task's directory is
	// AllocDir/<task name>.
	AllocDir string
	// JobName is the job's name (its ID when the allocation carries no
	// job), for the task's environment and the driver.
	JobName string
	// Task is the task to run; read only.
	Task *structs.Task
	// Driver runs the task (from the client's driver registry).
	Driver driver.Driver
	// Restart is the group's restart policy; nil means the default.
	Restart *structs.RestartPolicy
	// Logger is the alloc runner's logger; the task runner adds "task".
	Logger hclog.Logger
	// Ctx is the client's life: cancelled on shutdown, it bounds the
	// prestart hooks (artifact fetches).
	Ctx context.Context
	// LogMaxFiles and LogMaxFileSize (bytes) rotate the task's log files.
	LogMaxFiles    int
	LogMaxFileSize int64
	// CPUMHzPerCore returns one core's MHz on this node (0: unknown); it
	// is read at each start, as the node's fingerprint may change.
	CPUMHzPerCore func() int64
	// Handles records each started task's handle (the alloc runner's
	// putHandle writes it with the allocation's restore record as of the
	// task's Started event), so a restarted client reattaches to it.
	Handles taskHandleStore
	// UpdateState records an event and changes the task's state; the
	// alloc runner reports the change.
	UpdateState func(task string, e *structs.TaskEvent, mod func(ts *structs.TaskState))
	// Prestart are the hooks run, in order, before the task's first start
	// (not when reattaching to a recovered task).
	Prestart []taskPrestartHook
}

// taskHandleStore keeps the handles of started tasks (the client's local
// state database).
type taskHandleStore interface {
	putHandle(allocID, task string, h *driver.TaskHandle) error
}

// taskPrestartHook runs before a task's first start, after its directory
// is built. An error ends the task, failed, with an event of type
// failureEvent() whose message is the error.
type taskPrestartHook interface {
	// name names the hook in logs.
	name() string
	// failureEvent is the task event type recorded when prestart fails.
	failureEvent() string
	prestart(ctx context.Context, tr *taskRunner) error
}

// taskRunner runs one task of an allocation through its driver, restarting
// it per the group's restart policy, until it is dead.
type taskRunner struct {
	cfg     taskRunnerConfig
	alloc   *structs.Allocation
	task    *structs.Task
	drv     driver.Driver
	taskDir string
	logger  hclog.Logger
	restart *restartTracker

	// recovered is the handle of this task from an earlier life of the
	// client: the first run reattaches to it instead of starting the task.
	recovered *driver.TaskHandle

	killOnce sync.Once
	killCh   chan struct{}
	// ended closes once the task is dead and its final event recorded,
	// before its driver task is destroyed (for the native driver, until
	// the shim has written its exit file and exited; for docker, until
	// the container is removed); done closes after that. The alloc runner
	// may report a finished allocation at ended, and removes nothing
	// before done.
	ended chan struct{}
	done  chan struct{}
	// toDestroy is the driver task ID of the latest run, still to be
	// destroyed (destroyRun); only run's goroutine uses it.
	toDestroy string
	// restartCh asks the running task to be stopped and started again
	// (alloc restart), outside the restart policy; restarting is set while
	// that happens.
	restartCh  chan struct{}
	restarting atomic.Bool

	// deadlineState is the task's max_run_duration (deadline.go), set by
	// the alloc runner before run; deadlineStop is set when runOnce
	// stopped the task for it.
	deadlineState
	deadlineStop atomic.Bool

	// lastHandle is the handle of the task's latest start (or reattach),
	// for the proof that it is gone once stopped (endpoints.go).
	lastHandle atomic.Pointer[driver.TaskHandle]
}

func newTaskRunner(cfg taskRunnerConfig) *taskRunner {
	jobType := ""
	if cfg.Alloc.Job != nil {
		jobType = cfg.Alloc.Job.Type
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &taskRunner{
		cfg:       cfg,
		alloc:     cfg.Alloc,
		task:      cfg.Task,
		drv:       cfg.Driver,
		taskDir:   filepath.Join(cfg.AllocDir, cfg.Task.Name),
		logger:    logger.With("task", cfg.Task.Name),
		restart:   newRestartTracker(cfg.Restart, jobType),
		killCh:    make(chan struct{}),
		ended:     make(chan struct{}),
		done:      make(chan struct{}),
		restartCh: make(chan struct{}, 1),

		deadlineState: deadlineState{expireCh: make(chan struct{})},
	}
}

// kill asks the task to stop; run then stops it with the task's kill
// signal and timeout and marks it dead, not failed.
func (tr *taskRunner) kill() { tr.killOnce.Do(func() { close(tr.killCh) }) }

func (tr *taskRunner) killed() bool {
	select {
	case <-tr.killCh:
		return true
	default:
		return false
	}
}

func (tr *taskRunner) event(typ, display string, mod func(e *structs.TaskEvent)) *structs.TaskEvent {
	e := &structs.TaskEvent{Type: typ, Time: time.Now().UnixNano(), Message: display, DisplayMessage: display}
	if mod != nil {
		mod(e)
	}
	return e
}

// setState records an event and changes the task's state under the alloc
// runner's lock, then lets the alloc runner report the change.
func (tr *taskRunner) setState(e *structs.TaskEvent, mod func(ts *structs.TaskState)) {
	tr.cfg.UpdateState(tr.task.Name, e, mod)
}

// dead marks the task dead (failed or not) with a final event.
func (tr *taskRunner) dead(e *structs.TaskEvent, failed bool) {
	tr.setState(e, func(ts *structs.TaskState) {
		ts.State = structs.TaskStateDead
		ts.Failed = failed
		ts.FinishedAt = time.Now().UnixNano()
	})
}

// run is the task's life. It returns once the task is dead.
func (tr *taskRunner) run() {
	// Last in, first out: ended closes, then the latest run is destroyed,
	// then done closes.
	defer close(tr.done)
	defer tr.destroyRun()
	defer close(tr.ended)
	stdout, stderr, err := tr.setup()
	if err != nil {
		tr.logger.Error("task setup failed", "error", err)
		tr.dead(tr.event(structs.TaskEventSetupFailure, err.Error(), nil), true)
		return
	}
	if stdout != nil {
		defer stdout.Close()
		defer stderr.Close()
	}
	if tr.recovered == nil {
		tr.setState(tr.event(structs.TaskEventSetup, "Building Task Directory", nil), nil)
		if !tr.prestart() {
			return
		}
	}

	for {
		tr.destroyRun()
		// A recovered task runs already: reattach, then stop it if asked.
		if tr.killed() && tr.recovered == nil {
			tr.dead(tr.event(structs.TaskEventKilled, "Task killed before it started", nil), false)
			return
		}
		if tr.expired() && tr.recovered == nil {
			tr.deadlineExceeded(nil, "before it started")
			return
		}
		recovered := tr.recovered
		tr.recovered = nil
		var outW, errW io.Writer
		if stdout != nil {
			outW, errW = stdout, stderr
		}
		res, killed, err := tr.runOnce(outW, errW, recovered)
		if err != nil {
			tr.logger.Error("task failed to start", "error", err)
			tr.dead(tr.event(structs.TaskEventDriverFailure, err.Error(), func(e *structs.TaskEvent) {
				e.Details = map[string]string{"driver": tr.drv.Name()}
			}), true)
			return
		}
		if tr.deadlineStop.Load() {
			tr.deadlineExceeded(res, "and was stopped")
			return
		}
		if tr.restarting.Swap(false) && !killed {
			tr.setState(tr.event(structs.TaskEventRestarting, "Restart requested by user", func(e *structs.TaskEvent) {
				e.ExitCode, e.Signal = res.ExitCode, res.Signal
			}), func(ts *structs.TaskState) {
				ts.State = structs.TaskStatePending
				ts.Restarts++
			})
			continue
		}
		if killed {
			tr.dead(tr.event(structs.TaskEventKilled, "Task successfully killed", func(e *structs.TaskEvent) {
				e.ExitCode, e.Signal = res.ExitCode, res.Signal
			}), false)
			return
		}
		if tr.jobType() == structs.JobTypeBatch && res.Successful() {
			tr.dead(tr.event(structs.TaskEventTerminated, terminatedMessage(res, tr.memoryMB()), func(e *structs.TaskEvent) {
				e.ExitCode, e.Signal = res.ExitCode, res.Signal
			}), false)
			return
		}
		tr.setState(tr.event(structs.TaskEventTerminated, terminatedMessage(res, tr.memoryMB()), func(e *structs.TaskEvent) {
			e.ExitCode, e.Signal = res.ExitCode, res.Signal
		}), func(ts *structs.TaskState) { ts.ExitCode = res.ExitCode })

		if tr.expired() {
			// The deadline is the allocation's: a restart would only be
			// stopped again.
			tr.deadlineExceeded(res, "as it exited")
			return
		}
		restart, delay, reason := tr.restart.next()
		if !restart {
			tr.dead(tr.event(structs.TaskEventNotRestarting, reason, nil), true)
			return
		}
		tr.setState(tr.event(structs.TaskEventRestarting, fmt.Sprintf("%s: restarting in %s", reason, delay), func(e *structs.TaskEvent) {
			e.Details = map[string]string{"restart_delay": delay.String()}
		}), func(ts *structs.TaskState) {
			ts.State = structs.TaskStatePending
			ts.Restarts++
		})
		// What the last run left (for the native driver its cgroup and any
		// process still in it) goes before the restart delay, not after.
		tr.destroyRun()
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-tr.killCh:
			t.Stop()
			tr.dead(tr.event(structs.TaskEventKilled, "Task killed while waiting to restart", nil), false)
			return
		case <-tr.expireCh:
			t.Stop()
			tr.deadlineExceeded(nil, "while waiting to restart")
			return
		}
	}
}

func (tr *taskRunner) jobType() string {
	if j := tr.alloc.Job; j != nil {
		return j.Type
	}
	return ""
}

// terminatedMessage describes how a task ended; memoryMB is its memory
// limit in MiB, named when the OOM killer ended it (0: not named).
func terminatedMessage(r *driver.ExitResult, memoryMB int64) string {
	msg := fmt.Sprintf("Exit Code: %d", r.ExitCode)
	if r.Signal != 0 {
		msg += fmt.Sprintf(", Signal: %d", r.Signal)
	}
	if r.OOMKilled {
		if memoryMB > 0 {
			msg += fmt.Sprintf(", OOM killed (memory limit %d MiB)", memoryMB)
		} else {
			msg += ", OOM killed"
		}
	}
	if r.Err != nil {
		msg += ", Exit Message: " + r.Err.Error()
	}
	return msg
}

// TaskEventReattached is the event of a task found running again by a
// restarted client.
const TaskEventReattached = "Reattached"

// taskConfig is what the driver gets to start or recover the task.
func (tr *taskRunner) taskConfig(stdout, stderr io.Writer) *driver.TaskConfig {
	return &driver.TaskConfig{
		ID:             tr.alloc.ID + "/" + tr.task.Name,
		AllocID:        tr.alloc.ID,
		JobName:        tr.cfg.JobName,
		TaskGroup:      tr.alloc.TaskGroup,
		Name:           tr.task.Name,
		Config:         tr.task.Config,
		Env:            tr.env(),
		TaskDir:        tr.taskDir,
		Stdout:         stdout,
		Stderr:         stderr,
		Resources:      tr.resources(),
		CPUMHzPerCore:  tr.cpuMHzPerCore(),
		LogDir:         filepath.Join(tr.taskDir, "logs"),
		LogMaxFiles:    tr.cfg.LogMaxFiles,
		LogMaxFileSize: tr.cfg.LogMaxFileSize,
		User:           tr.task.User,
		Ports:          tr.ports(),
	}
}

// ports returns the host ports the plan gave the allocation.
func (tr *taskRunner) ports() []structs.AllocatedPortMapping {
	if ar := tr.alloc.AllocatedResources; ar != nil && ar.Shared != nil {
		return ar.Shared.Ports
	}
	return nil
}

// runOnce starts the task, or reattaches to recovered, and waits for it
// to exit or be killed. It returns a start error, or the exit result and
// whether it was killed. A recovered task that cannot be found again ends
// this run with an error result, so the restart policy decides.
func (tr *taskRunner) runOnce(stdout, stderr io.Writer, recovered *driver.TaskHandle) (*driver.ExitResult, bool, error) {
	cfg := tr.taskConfig(stdout, stderr)
	var h *driver.TaskHandle
	if recovered != nil {
		if err := tr.drv.RecoverTask(recovered, cfg); err != nil {
			tr.logger.Warn("cannot reattach to task after client restart", "error", err)
			return &driver.ExitResult{ExitCode: -1, Err: fmt.Errorf("task lost while the client was down: %w", err)}, tr.killed(), nil
		}
		h = recovered
		tr.logger.Info("reattached to task", "pid", h.PID, "container_id", h.ContainerID)
	} else {
		var err error
		h, err = tr.drv.StartTask(cfg)
		if err != nil {
			return nil, false, err
		}
	}
	tr.lastHandle.Store(h)
	// Destroyed by run once the run's outcome is recorded (destroyRun):
	// the exit is reported without waiting for it.
	tr.toDestroy = cfg.ID
	evType, msg := structs.TaskEventStarted, "Task started by client"
	if recovered != nil {
		evType, msg = TaskEventReattached, "Task reattached by restarted client"
	}
	tr.setState(tr.event(evType, msg, func(e *structs.TaskEvent) {
		if recovered == nil && !h.StartedAt.IsZero() {
			// When the driver saw the process start, not after the
			// handle's write to the state file (an fsync) above.
			e.Time = h.StartedAt.UnixNano()
		}
		e.Details = map[string]string{"pid": strconv.Itoa(h.PID)}
		if h.ContainerID != "" {
			e.Details["container_id"] = h.ContainerID
		}
	}), func(ts *structs.TaskState) {
		ts.State = structs.TaskStateRunning
		if ts.StartedAt == 0 {
			ts.StartedAt = h.StartedAt.UnixNano()
		}
	})
	if recovered == nil {
		// The handle's write (an fsync, with the allocation's record as
		// of the Started event above) overlaps the Started report and
		// the wait: a short task's exit is held behind it only until it
		// is durable. It is done before this run returns, so before the
		// task's end is handled (a restarted client must not start a
		// task that already ran), before the next start's handle, and
		// before the allocation's final record forgets the handles.
		recorded := make(chan struct{})
		defer func() { <-recorded }()
		go func() {
			defer close(recorded)
			if err := tr.cfg.Handles.putHandle(tr.alloc.ID, tr.task.Name, h); err != nil {
				tr.logger.Error("record task handle; a client restart will not find this task", "error", err)
			}
		}()
	}
	waitCh, err := tr.drv.WaitTask(context.Background(), cfg.ID)
	if err != nil {
		return nil, false, fmt.Errorf("wait for task: %w", err)
	}
	select {
	case res := <-waitCh:
		if res == nil {
			res = &driver.ExitResult{ExitCode: -1, Err: fmt.Errorf("driver lost the task")}
		}
		// An exit racing a kill request counts as killed.
		return res, tr.killed(), nil
	case <-tr.killCh:
	case <-tr.restartCh:
		tr.restarting.Store(true)
	case <-tr.expireCh:
	}
	timeout := tr.task.KillTimeout
	if timeout <= 0 {
		timeout = driver.DefaultKillTimeout
	}
	killing := fmt.Sprintf("Sent interrupt. Waiting %s before force killing", timeout)
	// The alloc runner expires every task of a deadline before any can
	// fail and kill its siblings: an expired task stops for its deadline
	// whichever channel the select took.
	if tr.expired() {
		tr.deadlineStop.Store(true)
		tr.restarting.Store(false)
		killing = fmt.Sprintf("max_run_duration of %s exceeded. %s", tr.maxRun, killing)
	}
	tr.setState(tr.event(structs.TaskEventKilling, killing, nil), nil)
	if err := tr.drv.StopTask(cfg.ID, timeout, tr.task.KillSignal); err != nil {
		tr.logger.Warn("stop task", "error", err)
	}
	res := <-waitCh
	if res == nil {
		res = &driver.ExitResult{ExitCode: -1}
	}
	return res, !tr.restarting.Load() || tr.killed(), nil
}

// destroyRun destroys the driver task of the latest run, if not yet done.
// The driver refuses (ErrTaskRunning) only a task still running, which
// the run loop never leaves behind: each run ends with the task's exit.
func (tr *taskRunner) destroyRun() {
	if tr.toDestroy == "" {
		return
	}
	id := tr.toDestroy
	tr.toDestroy = ""
	if err := tr.drv.DestroyTask(id); err != nil {
		tr.logger.Debug("destroy task", "error", err)
	}
}

// setup builds the task directory and opens the log writers. It returns
// nil writers when the driver writes the log files itself.
func (tr *taskRunner) setup() (stdout, stderr *rotatingWriter, err error) {
	// Beneath the allocation directory: a task (or a container, which
	// has it at /alloc) that replaced a directory with a symlink out of
	// it makes this fail instead of creating directories elsewhere.
	for _, d := range taskSubdirs {
		if err := allocdir.MkdirAll(tr.cfg.AllocDir, tr.task.Name+"/"+d, 0o700); err != nil {
			return nil, nil, fmt.Errorf("create task directory: %w", err)
		}
	}
	if lw, ok := tr.drv.(driver.LogFileWriter); ok && lw.WritesLogFiles() {
		return nil, nil, nil
	}
	logDir := filepath.Join(tr.taskDir, "logs")
	stdout, err = newTaskLogWriter(tr.cfg.AllocDir, logDir, tr.task.Name+".stdout", tr.cfg.LogMaxFileSize, tr.cfg.LogMaxFiles)
	if err != nil {
		return nil, nil, err
	}
	stderr, err = newTaskLogWriter(tr.cfg.AllocDir, logDir, tr.task.Name+".stderr", tr.cfg.LogMaxFileSize, tr.cfg.LogMaxFiles)
	if err != nil {
		stdout.Close()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// memoryMB is the task's memory limit in MiB, 0 when it has none.
func (tr *taskRunner) memoryMB() int64 {
	if r := tr.resources(); r != nil {
		return r.MemoryMB
	}
	return 0
}

// cpuMHzPerCore is Config.CPUMHzPerCore's answer, 0 when there is none.
func (tr *taskRunner) cpuMHzPerCore() int64 {
	if tr.cfg.CPUMHzPerCore == nil {
		return 0
	}
	return tr.cfg.CPUMHzPerCore()
}

// cpuMHzPerCore is the node's "cpu.frequency" attribute: one core's MHz,
// the unit its CPU capacity is counted in (fingerprint.go); 0 if unknown.
func (c *Client) cpuMHzPerCore() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	mhz, _ := strconv.ParseInt(c.node.Attributes["cpu.frequency"], 10, 64)
	return mhz
}

func (tr *taskRunner) resources() *structs.AllocatedTaskResources {
	if ar := tr.alloc.AllocatedResources; ar != nil {
		return ar.Tasks[tr.task.Name]
	}
	return nil
}

// env is the task's Env plus the GPULAYER_* variables, their NOMAD_*
// twins and the visible GPU devices. A task with no GPU gets NVIDIA_VISIBLE_DEVICES=void and an empty
// CUDA_VISIBLE_DEVICES, so it never sees the host's GPUs.
func (tr *taskRunner) env() map[string]string {
	a := tr.alloc
	env := make(map[string]string, len(tr.task.Env)+12)
	for k, v := range tr.task.Env {
		env[k] = v
	}
	env["GPULAYER_ALLOC_ID"] = a.ID
	env["GPULAYER_ALLOC_NAME"] = a.Name
	env["GPULAYER_ALLOC_INDEX"] = strconv.Itoa(a.Index())
	env["GPULAYER_JOB_NAME"] = tr.cfg.JobName
	env["GPULAYER_GROUP_NAME"] = a.TaskGroup
	env["GPULAYER_TASK_NAME"] = tr.task.Name
	env["GPULAYER_TASK_DIR"] = tr.taskDir
	env["GPULAYER_ALLOC_DIR"] = tr.cfg.AllocDir
	env["GPULAYER_OUTPUT_DIR"] = filepath.Join(tr.taskDir, "outputs")
	nomadEnv(env, a, tr.task.Name, tr.taskDir)
	ids := tr.resources().GPUIDs()
	env["GPULAYER_GPU_COUNT"] = strconv.Itoa(len(ids))
	if len(ids) == 0 {
		env["CUDA_VISIBLE_DEVICES"] = ""
		env["NVIDIA_VISIBLE_DEVICES"] = "void"
	} else {
		env["CUDA_VISIBLE_DEVICES"] = strings.Join(ids, ",")
		env["NVIDIA_VISIBLE_DEVICES"] = strings.Join(ids, ",")
	}
	schedulingEnv(env, a, tr.resources())
	portEnv(env, a, tr.task.Driver)
	metaEnv(env, a, tr.task, tr.task.Env)
	return env
}

// requestRestart asks the running task to stop and start again. It
// reports false when the task is not running (or a restart is pending).
func (tr *taskRunner) requestRestart() bool {
	if tr.killed() {
		return false
	}
	select {
	case tr.restartCh <- struct{}{}:
		return true
	default:
		return false
	}
}

// prestart runs the prestart hooks, bounded by the client's life and the
// task's deadline. A hook's failure ends the task (failed, with the hook's
// event, or a Deadline Exceeded one when the deadline cut it short) and
// prestart reports false.
func (tr *taskRunner) prestart() bool {
	ctx, cancel := context.WithCancel(tr.cfg.Ctx)
	defer cancel()
	go func() {
		select {
		case <-tr.expireCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	for _, h := range tr.cfg.Prestart {
		if err := h.prestart(ctx, tr); err != nil {
			if tr.expired() {
				tr.deadlineExceeded(nil, fmt.Sprintf("during its %s prestart hook, before it started", h.name()))
				return false
			}
			tr.logger.Error("prestart hook failed", "hook", h.name(), "error", err)
			tr.dead(tr.event(h.failureEvent(), err.Error(), nil), true)
			return false
		}
	}
	return true
}

// nomadEnv sets the NOMAD_* variables a Nomad jobspec reads, where
// GPUlayer has the concept (Nomad's runtime environment): the
// allocation's ID, name and index, the job's ID, name and parent, the
// group, task and namespace, and the task's local/ and secrets/
// directories (NOMAD_TASK_DIR and NOMAD_SECRETS_DIR; the docker driver
// maps them to their container paths). Nomad's shared NOMAD_ALLOC_DIR has
// no GPUlayer counterpart and is not set.
func nomadEnv(env map[string]string, a *structs.Allocation, task, taskDir string) {
	env["NOMAD_ALLOC_ID"] = a.ID
	env["NOMAD_ALLOC_NAME"] = a.Name
	env["NOMAD_ALLOC_INDEX"] = strconv.Itoa(a.Index())
	env["NOMAD_JOB_ID"] = a.JobID
	env["NOMAD_JOB_NAME"] = a.JobID
	if j := a.Job; j != nil {
		if j.Name != "" {
			env["NOMAD_JOB_NAME"] = j.Name
		}
		if j.ParentID != "" {
			env["NOMAD_JOB_PARENT_ID"] = j.ParentID
		}
	}
	env["NOMAD_GROUP_NAME"] = a.TaskGroup
	env["NOMAD_TASK_NAME"] = task
	env["NOMAD_NAMESPACE"] = a.Namespace
	if a.Namespace == "" {
		env["NOMAD_NAMESPACE"] = "default"
	}
	env["NOMAD_TASK_DIR"] = filepath.Join(taskDir, "local")
	env["NOMAD_SECRETS_DIR"] = filepath.Join(taskDir, "secrets")
}
