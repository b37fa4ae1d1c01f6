// Package driver declares the interface every task driver implements
// (native processes, Docker containers) and the types that cross it. The
// client's task runner is the only caller; drivers never talk to servers.
package driver

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Sentinel errors returned by drivers. Callers test them with errors.Is.
var (
	// ErrTaskNotFound is returned for a task ID the driver does not know, or,
	// from RecoverTask, for a task whose process is gone.
	ErrTaskNotFound = errors.New("task not found")
	// ErrTaskExists is returned by StartTask for an ID already running.
	ErrTaskExists = errors.New("task already exists")
	// ErrTaskRunning is returned by DestroyTask for a task still running.
	ErrTaskRunning = errors.New("task is still running")
	// ErrInvalidConfig wraps every problem with a task's driver config
	// (unknown key, missing command, command not executable). It also
	// matches structs.ErrInvalid.
	ErrInvalidConfig = &configError{}
)

type configError struct{}

func (*configError) Error() string { return "invalid driver config" }

// Is lets errors.Is(err, structs.ErrInvalid) hold for config errors.
func (*configError) Is(target error) bool { return target == structs.ErrInvalid }

// Default stop parameters used when StopTask gets zero values.
const (
	DefaultKillTimeout = 5 * time.Second
	DefaultKillSignal  = "SIGTERM"
)

// Driver runs tasks. Implementations are safe for concurrent use by many
// task runners.
type Driver interface {
	// Name is the driver name tasks use, e.g. "native".
	Name() string
	// Fingerprint reports whether the driver works on this host, with
	// attributes such as "driver.native.version".
	Fingerprint() *structs.DriverInfo
	// StartTask validates cfg.Config, then starts the task. Config problems
	// return an error wrapping ErrInvalidConfig that names the key; an ID
	// already started returns ErrTaskExists.
	StartTask(cfg *TaskConfig) (*TaskHandle, error)
	// WaitTask returns a channel that receives the task's exit result once
	// and is then closed. If ctx ends first the channel is closed without
	// a value. Unknown IDs return ErrTaskNotFound.
	WaitTask(ctx context.Context, taskID string) (<-chan *ExitResult, error)
	// StopTask sends signal (default SIGTERM) to the task's whole process
	// group and SIGKILL after timeout (default 5 seconds) if it still runs.
	// It returns once the task has exited. Unknown IDs return
	// ErrTaskNotFound; stopping an exited task is not an error.
	StopTask(taskID string, timeout time.Duration, signal string) error
	// InspectTask returns the task's current status, or ErrTaskNotFound.
	InspectTask(taskID string) (*TaskStatus, error)
	// RecoverTask finds the task behind a handle saved before a client
	// restart (a process by pid and start time, a container by ID) and
	// tracks it again without restarting it; cfg is the task's config as
	// it was started, whose Stdout and Stderr receive output from now on
	// where the driver streams it. It returns ErrTaskNotFound if the task
	// is gone and its exit status was not recorded, or its pid was reused.
	RecoverTask(h *TaskHandle, cfg *TaskConfig) error
	// DestroyTask forgets an exited task. It returns ErrTaskRunning for a
	// task that still runs and ErrTaskNotFound for an unknown ID.
	DestroyTask(taskID string) error
}

// TaskConfig is everything a driver needs to start one task.
type TaskConfig struct {
	// ID is unique per task run: "<alloc-id>/<task>".
	ID        string
	AllocID   string
	JobName   string
	TaskGroup string
	Name      string
	// Config is the task's driver block, e.g. {"command": "/bin/sh", "args": [...]}.
	Config map[string]interface{}
	// Env is the task's final environment; nothing else is inherited.
	Env map[string]string
	// TaskDir is the task's working directory, created by the client.
	TaskDir string
	// Stdout and Stderr receive the task's output. Nil discards it. The
	// driver does not close them.
	Stdout io.Writer
	Stderr io.Writer
	// Resources are what the plan gave this task.
	Resources *structs.AllocatedTaskResources
	// CPUMHzPerCore is one core's clock in MHz, the figure the node's CPU
	// capacity (and so Resources.CPU) is counted in: the client fills it
	// from the node's "cpu.frequency" attribute. A driver that caps CPU
	// time (the native driver's cpu_hard_limit) turns MHz into cores with
	// it. 0 means unknown.
	CPUMHzPerCore int64
	// LogDir, LogMaxFiles and LogMaxFileSize (bytes) let a driver that
	// writes the task's rotated log files itself (the native driver's
	// shim, which outlives the client) name them <LogDir>/<Name>.stdout.<n>
	// and .stderr.<n>. When LogDir is empty, Stdout and Stderr are used.
	LogDir         string
	LogMaxFiles    int
	LogMaxFileSize int64
	// User is the user the task runs as (native driver, agent running as
	// root only); empty means the agent's own user.
	User string
	// Ports are the host ports the plan gave the allocation (its group's
	// network block). A native task binds them itself (NOMAD_PORT_<label>);
	// the docker driver maps each host port to its To port (the same port
	// when To is 0) on the mapping's HostIP.
	Ports []structs.AllocatedPortMapping
}

// AllocDir is the allocation directory: the parent of TaskDir. Every file
// a driver touches under it is opened beneath it with package allocdir,
// anchored there, since the task can change anything below it.
func (c *TaskConfig) AllocDir() string { return filepath.Dir(c.TaskDir) }

// LogFileWriter is implemented by drivers that write a task's rotated log
// files themselves when TaskConfig.LogDir is set (so the files keep
// growing while no client runs). The client then opens no writers of its
// own for the task.
type LogFileWriter interface {
	WritesLogFiles() bool
}

// Signaler is implemented by drivers that can send a signal to a running
// task (alloc signal).
type Signaler interface {
	// SignalTask sends the named signal ("SIGHUP", "HUP") to the task. It
	// returns ErrTaskNotFound for an unknown ID and an error wrapping
	// ErrInvalidConfig for an unknown signal.
	SignalTask(taskID, signal string) error
}

// GoneProver is implemented by drivers that can prove that a task they
// stopped left nothing running (an endpoint member is reported stopped
// only after this proof).
type GoneProver interface {
	// TaskGone returns nil when nothing of the task behind h runs any
	// more (native: no process is left in its process group; docker: its
	// container no longer exists), and an error saying what is left
	// otherwise or when it cannot tell.
	TaskGone(h *TaskHandle) error
}

// ExecOptions describe a command run inside a running task's environment.
type ExecOptions struct {
	// Cmd is the command and its arguments; required.
	Cmd []string
	// Tty asks for a pseudo-terminal; Stdout then carries both streams.
	Tty    bool
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Execer is implemented by drivers that can run a command inside a
// running task's environment (alloc exec).
type Execer interface {
	// ExecTask runs opts.Cmd with the task's environment, working
	// directory and (docker) namespaces, and returns its exit code once it
	// ends or ctx is done. It returns ErrTaskNotFound for an unknown or
	// exited task.
	ExecTask(ctx context.Context, taskID string, opts *ExecOptions) (int, error)
}

// TaskHandle identifies a started task so it can be found again after a
// client restart.
type TaskHandle struct {
	ID     string
	Driver string
	// PID is the task's process (native), 0 for a container.
	PID int
	// StartTime is the process start time in clock ticks since boot, field
	// 22 of /proc/<pid>/stat (0 where /proc is unavailable).
	StartTime uint64
	StartedAt time.Time
	// ShimPID and ShimStartTime identify the native driver's shim process,
	// which holds the task's output pipes and records its exit status.
	ShimPID       int    `json:",omitempty"`
	ShimStartTime uint64 `json:",omitempty"`
	// ContainerID is the Docker container's ID.
	ContainerID string `json:",omitempty"`
}

// ExitResult is how a task ended.
type ExitResult struct {
	// ExitCode is the process exit status, or -1 when killed by a signal.
	ExitCode int
	// Signal is the number of the signal that killed it, 0 if none.
	Signal    int
	OOMKilled bool
	// Err is set when the driver lost track of the task.
	Err error
}

// Successful reports whether the task exited 0 without a signal or error.
func (r *ExitResult) Successful() bool {
	return r != nil && r.ExitCode == 0 && r.Signal == 0 && r.Err == nil
}

// Task states reported by InspectTask.
const (
	TaskStateRunning = "running"
	TaskStateExited  = "exited"
)

// TaskStatus is a driver's view of one task.
type TaskStatus struct {
	ID          string
	Name        string
	State       string // TaskStateRunning or TaskStateExited
	PID         int
	StartedAt   time.Time
	CompletedAt time.Time
	ExitResult  *ExitResult
	// ImageID is the docker driver's resolved image ID of the container
	// ("sha256:<hex>", what the daemon started, whatever tag named it);
	// empty for other drivers or when the daemon did not say.
	ImageID string `json:",omitempty"`
	// Executable is the native driver's resolved path of the command it
	// started (driver config "command", found the way StartTask finds
	// it); empty for other drivers or a recovered task whose command
	// no longer resolves.
	Executable string `json:",omitempty"`
}
