package native

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/agent/driver/logging"
	"github.com/gpulayer/gpulayer/agent/driver/native/cgroups"
)

// ShimEnv names the environment variable that turns any binary importing
// this package into the native driver's task shim: when it is set (to
// "1"; the spec comes on file descriptor shimSpecFD, never through a file
// a task could change) at process start, the package's init function
// runs the shim and exits, before main or TestMain. This is the re-exec
// pattern of moby's pkg/reexec and Nomad's executor: the gpulayer binary
// (or a test binary) starts a copy of itself as the shim.
//
// Why a shim: a native task is the agent's child, and its stdout and
// stderr are pipes. If the agent died holding the read ends, the task
// would get SIGPIPE on its next write and its exit status would be lost
// (it is reaped by init, not by the restarted agent). The shim runs in its
// own session, owns the pipes, writes the rotated log files itself and
// records the exit status in a file, so a task survives the agent's death
// (kill -9 included) and a restarted agent reattaches to it, reads its
// logs from the same files and learns how it ended. The design follows
// Nomad's logmon and executor processes, in one small process.
const ShimEnv = "GPULAYER_NATIVE_SHIM"

func init() {
	if os.Getenv(ShimEnv) != "" {
		os.Exit(runShim())
	}
}

// maxShimSpec bounds the shim spec, in bytes.
const maxShimSpec = 16 << 20

// openLogRoot opens dir, a directory below the allocation directory
// allocDir, beneath it.
func openLogRoot(allocDir, dir string) (*os.Root, error) {
	if allocDir == "" {
		return nil, fmt.Errorf("no allocation directory to open %s beneath", dir)
	}
	return allocdir.OpenBeneath(allocDir, dir)
}

// shimSpec is what the driver tells the shim, as JSON on a pipe
// (shimSpecFD). It is never a file in the allocation directory: a task
// that could write there (a docker task of the same allocation is root
// in its container, with the directory at /alloc) could change the
// command or the user the shim, running as root, starts.
type shimSpec struct {
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
	// ExitFile receives the shimExit JSON once the task has exited.
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

// shimExit is how the task ended, as recorded by the shim.
type shimExit struct {
	ExitCode int
	Signal   int
	// Err is set when the task could not be waited for.
	Err string `json:",omitempty"`
	// At is when the task exited, in Unix nanoseconds.
	At int64
}

// shimStatusFD is the file descriptor of the pipe on which the shim tells
// the driver the task's pid ("started <pid>") or why it did not start
// ("error <message>"). It is ExtraFiles[0] of the shim's command.
const shimStatusFD = 3

// shimSpecFD is the file descriptor on which the shim reads its spec (JSON,
// then end of file). It is ExtraFiles[1] of the shim's command.
const shimSpecFD = 4

// runShim starts the task described by the spec it reads on shimSpecFD,
// copies its output to rotated log files beneath the spec's allocation
// directory, writes its exit status there and returns the shim's own exit
// code: 0 once the exit status is recorded, 1 otherwise.
func runShim() int {
	status := os.NewFile(shimStatusFD, "status")
	report := func(format string, args ...interface{}) {
		if status != nil {
			// The driver may be gone: an error here changes nothing.
			_, _ = fmt.Fprintf(status, format+"\n", args...)
			_ = status.Close()
			status = nil
		}
	}
	fail := func(err error) int {
		report("error %s", strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	specFile := os.NewFile(shimSpecFD, "spec")
	if specFile == nil {
		return fail(errors.New("no shim spec descriptor"))
	}
	b, err := io.ReadAll(io.LimitReader(specFile, maxShimSpec+1))
	specFile.Close()
	if err != nil {
		return fail(fmt.Errorf("read shim spec: %w", err))
	}
	if len(b) > maxShimSpec {
		return fail(fmt.Errorf("shim spec over %d bytes", maxShimSpec))
	}
	var spec shimSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fail(fmt.Errorf("decode shim spec: %w", err))
	}
	allocDir := spec.AllocDir
	writer := func(base string) (*logging.RotatingWriter, error) {
		root, err := openLogRoot(allocDir, spec.LogDir)
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
	cmd.WaitDelay = ioWaitDelay
	// The task must be in its cgroup before its first instruction. On v2
	// it is cloned straight into it. On v1 the shim joins the task's
	// cgroups for the fork and goes back right after, so the task inherits
	// them; that is safe here because the shim starts nothing else, and
	// it keeps the shim (its memory, and a kill of the cgroup) out of the
	// task's cgroup afterwards. Moving the task in after the start would
	// let it run unlimited, and fork children outside, for a moment.
	start := cmd.Start
	if spec.Cgroup != nil {
		start = func() error { return spec.Cgroup.Start(cmd) }
	}
	if err := start(); err != nil {
		return fail(fmt.Errorf("start command %q: %w", spec.Args[0], err))
	}
	report("started %d", cmd.Process.Pid)
	werr := cmd.Wait()
	r := exitResult(cmd.ProcessState, werr)
	ex := shimExit{ExitCode: r.ExitCode, Signal: r.Signal, At: time.Now().UnixNano()}
	if r.Err != nil {
		ex.Err = r.Err.Error()
	}
	if err := writeFile(allocDir, spec.ExitFile, ex, true); err != nil {
		return 1
	}
	return 0
}

// writeFile writes v as JSON to path, beneath the allocation directory
// allocDir, through a fresh temporary file and a rename (allocdir.WriteFile),
// with an fsync first when durable, so a reader sees the whole file or
// none, even after a crash of the host.
func writeFile(allocDir, path string, v interface{}, durable bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	root, err := openLogRoot(allocDir, filepath.Dir(path))
	if err != nil {
		return err
	}
	defer root.Close()
	return allocdir.WriteFile(root, filepath.Base(path), b, 0o600, durable)
}

// shimExitPath returns the exit file path of a task's shim: a hidden file
// beside its logs, which no log reader lists.
func shimExitPath(cfg *driver.TaskConfig) string {
	return filepath.Join(cfg.LogDir, "."+cfg.Name+".exit")
}

// maxExitFile bounds the exit file, in bytes.
const maxExitFile = 64 << 10

// readExitFile returns the exit status the shim recorded at path, beneath
// the allocation directory allocDir, or an error wrapping fs.ErrNotExist
// when it recorded none (and allocdir.ErrUnsafe for a file the task
// planted there).
func readExitFile(allocDir, path string) (*driver.ExitResult, time.Time, error) {
	root, err := openLogRoot(allocDir, filepath.Dir(path))
	if err != nil {
		return nil, time.Time{}, err
	}
	defer root.Close()
	b, err := allocdir.ReadFile(root, filepath.Base(path), maxExitFile)
	if err != nil {
		return nil, time.Time{}, err
	}
	var ex shimExit
	if err := json.Unmarshal(b, &ex); err != nil {
		return nil, time.Time{}, fmt.Errorf("decode %s: %w", path, err)
	}
	r := &driver.ExitResult{ExitCode: ex.ExitCode, Signal: ex.Signal}
	if ex.Err != "" {
		r.Err = errors.New(ex.Err)
	}
	return r, time.Unix(0, ex.At), nil
}

// startShim starts the shim for spec and returns its command and the
// task's pid once the shim reported it. A task that could not start
// returns the shim's error message.
func startShim(cfg *driver.TaskConfig, spec *shimSpec) (*exec.Cmd, int, error) {
	exitPath := shimExitPath(cfg)
	spec.ExitFile = exitPath
	spec.AllocDir = cfg.AllocDir()
	root, err := openLogRoot(spec.AllocDir, cfg.LogDir)
	if err != nil {
		return nil, 0, fmt.Errorf("open the task's log directory: %w", err)
	}
	err = root.Remove(filepath.Base(exitPath))
	root.Close()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("remove old exit file: %w", err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, 0, fmt.Errorf("encode shim spec: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, 0, fmt.Errorf("find own executable for the task shim: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, 0, fmt.Errorf("shim status pipe: %w", err)
	}
	defer r.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		w.Close()
		return nil, 0, fmt.Errorf("shim spec pipe: %w", err)
	}
	shim := exec.Command(exe)
	shim.Env = []string{ShimEnv + "=1"}
	// Not the log directory: a path there could lead anywhere.
	shim.Dir = "/"
	shim.ExtraFiles = []*os.File{w, specR}
	// A session of its own: the agent's death, or a signal to the agent's
	// process group, does not reach the shim or the task.
	shim.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := shim.Start(); err != nil {
		w.Close()
		specR.Close()
		specW.Close()
		return nil, 0, fmt.Errorf("start task shim: %w", err)
	}
	w.Close()
	specR.Close()
	// The shim reads the whole spec before it writes its status line, and
	// a pipe holds 64 KiB: write from a goroutine so a larger spec cannot
	// block the start.
	go func() {
		_, _ = specW.Write(specJSON)
		specW.Close()
	}()
	line, rerr := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	if msg, ok := strings.CutPrefix(line, "error "); ok {
		_ = shim.Wait()
		return nil, 0, errors.New(msg)
	}
	pidStr, ok := strings.CutPrefix(line, "started ")
	pid, perr := strconv.Atoi(pidStr)
	if !ok || perr != nil || pid <= 0 {
		_ = shim.Process.Kill()
		_ = shim.Wait()
		return nil, 0, fmt.Errorf("task shim did not report a pid (got %q, read error %v)", line, rerr)
	}
	return shim, pid, nil
}
