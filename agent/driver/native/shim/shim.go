// Package shim is the native driver's task shim: the process that starts a
// native task, owns its output pipes, writes its rotated log files and
// records how it ended, so the task survives the agent's death (kill -9
// included) and a restarted agent reattaches to it (package native,
// startShim).
//
// The shim is the gpulayer binary (or a test binary) started again with
// Env set; the package's init function then runs the shim and exits,
// before main or TestMain (the re-exec pattern of moby's pkg/reexec and
// Nomad's executor). It is a package of its own, importing only the
// standard library and the driver's small leaf packages (logging, allocdir,
// cgroups), because Go initialises a package as soon as its imports are
// initialised, in import-path order: with no heavy imports this init runs
// after about 120 small packages instead of after the binary's 186
// (structs, msgpack, Prometheus, HCL, the Docker client...): a shim's exec
// to its first instruction went from 6.8 ms to 3.8 ms on a loaded 2-core
// host. The driver also keeps one shim started ahead of its task
// (native's shim_idle.go), so that cost is usually off a task's start
// altogether; it is still paid by the first task, by tasks starting at
// once, and by the idle shim's CPU. Keep this package light: importing
// structs or anything heavy here slows every shim.
package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/agent/driver/logging"
	"github.com/gpulayer/gpulayer/agent/driver/native/cgroups"
)

// Env names the environment variable that turns any binary importing this
// package into the task shim: when it is set (to "1"; the spec comes on
// file descriptor SpecFD, never through a file a task could change) at
// process start, the package's init function runs the shim and exits.
const Env = "GPULAYER_NATIVE_SHIM"

func init() {
	if os.Getenv(Env) != "" {
		os.Exit(run())
	}
}

// MaxSpec bounds the shim spec, in bytes.
const MaxSpec = 16 << 20

// StatusFD is the file descriptor of the pipe on which the shim tells the
// driver the task's pid ("started <pid>") or why it did not start ("error
// <message>"), then, once the task has exited, how it ended ("exited "
// and the Exit JSON). It is ExtraFiles[0] of the shim's command.
const StatusFD = 3

// ExitedPrefix starts the status line that carries the task's Exit.
const ExitedPrefix = "exited "

// SpecFD is the file descriptor on which the shim reads its spec (JSON,
// then end of file). It is ExtraFiles[1] of the shim's command.
const SpecFD = 4

// IOWaitDelay bounds how long a finished task's output is still copied
// when a process it left behind holds its stdout or stderr open.
const IOWaitDelay = 2 * time.Second

// Spec is what the driver tells the shim, as JSON on a pipe (SpecFD). It is
// never a file in the allocation directory: a task that could write there
// (a docker task of the same allocation is root in its container, with the
// directory at /alloc) could change the command or the user the shim,
// running as root, starts.
type Spec struct {
	Path string
	// Args includes argv[0].
	Args   []string
	Dir    string
	Env    []string
	LogDir string
	// AllocDir is the allocation directory, the anchor beneath which the
	// shim opens LogDir and its files.
	AllocDir   string
	StdoutBase string
	StderrBase string
	MaxSize    int64
	MaxFiles   int
	// ExitFile receives the Exit JSON once the task has exited.
	ExitFile string
	// UID and GID, when set, are the user the task runs as.
	UID *uint32 `json:",omitempty"`
	GID *uint32 `json:",omitempty"`
	// Groups are the user's supplementary groups (none: cleared).
	Groups []uint32 `json:",omitempty"`
	// Cgroup, when set, is the task's cgroup: the shim starts the task
	// inside it (cgroups.Placement.Start).
	Cgroup *cgroups.Placement `json:",omitempty"`
}

// Exit is how the task ended, as recorded by the shim in Spec.ExitFile.
type Exit struct {
	ExitCode int
	Signal   int
	// Err is set when the task could not be waited for.
	Err string `json:",omitempty"`
	// At is when the task exited, in Unix nanoseconds.
	At int64
}

// OpenLogRoot opens dir, a directory below the allocation directory
// allocDir, beneath it.
func OpenLogRoot(allocDir, dir string) (*os.Root, error) {
	if allocDir == "" {
		return nil, fmt.Errorf("no allocation directory to open %s beneath", dir)
	}
	return allocdir.OpenBeneath(allocDir, dir)
}

// run starts the task described by the spec it reads on SpecFD, copies its
// output to rotated log files beneath the spec's allocation directory,
// writes its exit status there and returns the shim's own exit code: 0
// once the exit status is recorded, 1 otherwise.
func run() int {
	// Before anything else: the task must inherit none of the shim's
	// descriptors, neither the status pipe (a task that wrote "started 1"
	// on it first would have the driver kill -1 on stop) nor any the
	// agent was started with.
	closeOnExecFrom(3)
	unignoreSignals()
	status := os.NewFile(StatusFD, "status")
	// say writes a status line; the driver may be gone (the write then
	// fails with EPIPE), which changes nothing.
	say := func(format string, args ...interface{}) {
		if status != nil {
			_, _ = fmt.Fprintf(status, format+"\n", args...)
		}
	}
	closeStatus := func() {
		if status != nil {
			_ = status.Close()
			status = nil
		}
	}
	fail := func(err error) int {
		say("error %s", strings.ReplaceAll(err.Error(), "\n", " "))
		closeStatus()
		return 1
	}
	specFile := os.NewFile(SpecFD, "spec")
	if specFile == nil {
		return fail(errors.New("no shim spec descriptor"))
	}
	b, err := io.ReadAll(io.LimitReader(specFile, MaxSpec+1))
	specFile.Close()
	if err != nil {
		return fail(fmt.Errorf("read shim spec: %w", err))
	}
	if len(b) > MaxSpec {
		return fail(fmt.Errorf("shim spec over %d bytes", MaxSpec))
	}
	var spec Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fail(fmt.Errorf("decode shim spec: %w", err))
	}
	if len(spec.Args) == 0 {
		return fail(errors.New("shim spec without arguments"))
	}
	allocDir := spec.AllocDir
	writer := func(base string) (*logging.RotatingWriter, error) {
		root, err := OpenLogRoot(allocDir, spec.LogDir)
		if err != nil {
			return nil, fmt.Errorf("open log directory: %w", err)
		}
		w, err := logging.NewRotatingWriterIn(root, base, spec.MaxSize, spec.MaxFiles)
		if err != nil {
			root.Close()
			return nil, err
		}
		return w, nil
	}
	stdout, err := writer(spec.StdoutBase)
	if err != nil {
		return fail(err)
	}
	defer stdout.Close()
	stderr, err := writer(spec.StderrBase)
	if err != nil {
		return fail(err)
	}
	defer stderr.Close()

	cmd := exec.Command(spec.Path)
	cmd.Args = spec.Args
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	// The task leads its own process group inside the shim's session, so
	// a stop signal reaches every process it started, and not the shim.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.UID != nil && spec.GID != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: *spec.UID, Gid: *spec.GID, Groups: spec.Groups}
	}
	cmd.WaitDelay = IOWaitDelay
	// The task must be in its cgroup before its first instruction. On v2
	// it is cloned straight into it. On v1 the shim's starting thread
	// joins the task's cgroups for the fork and goes back right after, so
	// the task inherits them and the shim (its other threads, its memory,
	// and after the start all of it) stays out of the task's cgroup and of
	// a kill of it (cgroups.Placement.Start). Moving the task in after the start would
	// let it run unlimited, and fork children outside, for a moment.
	start := cmd.Start
	if spec.Cgroup != nil {
		start = func() error { return spec.Cgroup.Start(cmd) }
	}
	if err := start(); err != nil {
		return fail(fmt.Errorf("start command %q: %w", spec.Args[0], err))
	}
	say("started %d", cmd.Process.Pid)
	werr := cmd.Wait()
	ex := exitOf(cmd.ProcessState, werr)
	ex.At = time.Now().UnixNano()
	// The driver learns the exit on the status pipe at once; the exit file,
	// for a driver restarted meanwhile, is written after, and durably
	// before the shim exits, so its fsync is not on the path from the
	// task's exit to its status report. A driver that sees the shim exit
	// without this line reads the file.
	if b, err := json.Marshal(ex); err == nil {
		say("%s%s", ExitedPrefix, b)
	}
	closeStatus()
	if err := WriteFile(allocDir, spec.ExitFile, ex, true); err != nil {
		return 1
	}
	return 0
}

// ParseExited decodes the Exit of an "exited" status line (without its
// newline); ok is false for any other line or a malformed one.
func ParseExited(line string) (ex Exit, ok bool) {
	rest, found := strings.CutPrefix(line, ExitedPrefix)
	if !found || json.Unmarshal([]byte(rest), &ex) != nil {
		return Exit{}, false
	}
	return ex, true
}

// unignoreSignals gives the task the default action of SIGHUP and SIGINT
// when the agent, and so this shim, was started with them ignored (nohup
// ignores SIGHUP; a non-interactive shell's `gpulayer agent &` ignores
// SIGINT): an ignored signal stays ignored across exec, so a task would
// never see a stop signal (kill_signal = "SIGINT") or a reload (SIGHUP)
// and would be killed at its kill_timeout instead. The Go runtime keeps
// only these two ignored when it starts (it installs its own handler for
// every other); a signal with a handler gets its default action at exec,
// so the shim takes them with os/signal, and drops what it receives (in a
// session of its own, it is sent neither).
func unignoreSignals() {
	var sigs []os.Signal
	for _, s := range []os.Signal{syscall.SIGHUP, syscall.SIGINT} {
		if signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		for range ch {
		}
	}()
}

// closeOnExecFrom marks every open file descriptor from min on
// close-on-exec, so that only the descriptors exec.Cmd sets up (stdin,
// stdout, stderr) reach the task. The shim itself keeps using them. It
// lists /proc/self/fd; without /proc it marks the first 4096.
func closeOnExecFrom(min int) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		for fd := min; fd < 4096; fd++ {
			syscall.CloseOnExec(fd)
		}
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= min {
			syscall.CloseOnExec(fd)
		}
	}
}

// exitOf is how a waited-for process ended: its exit code, or -1 and the
// signal that killed it, or -1 and the wait error.
func exitOf(ps *os.ProcessState, waitErr error) Exit {
	if ps == nil {
		return Exit{ExitCode: -1, Err: fmt.Sprintf("wait: %v", waitErr)}
	}
	ex := Exit{ExitCode: ps.ExitCode()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ex.Signal = int(ws.Signal())
		ex.ExitCode = -1
	}
	return ex
}

// WriteFile writes v as JSON to path, beneath the allocation directory
// allocDir, through a fresh temporary file and a rename (allocdir.WriteFile),
// with an fsync first when durable, so a reader sees the whole file or
// none, even after a crash of the host.
func WriteFile(allocDir, path string, v interface{}, durable bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	root, err := OpenLogRoot(allocDir, filepath.Dir(path))
	if err != nil {
		return err
	}
	defer root.Close()
	return allocdir.WriteFile(root, filepath.Base(path), b, 0o600, durable)
}
