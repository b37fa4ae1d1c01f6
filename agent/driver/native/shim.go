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
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/agent/driver/native/shim"
)

// Why a shim: a native task is the agent's child, and its stdout and
// stderr are pipes. If the agent died holding the read ends, the task
// would get SIGPIPE on its next write and its exit status would be lost
// (it is reaped by init, not by the restarted agent). The shim (package
// shim: this binary started again with shim.Env set) runs in its own
// session, owns the pipes, writes the rotated log files itself and records
// the exit status in a file, so a task survives the agent's death (kill -9
// included) and a restarted agent reattaches to it, reads its logs from
// the same files and learns how it ended. The design follows Nomad's
// logmon and executor processes, in one small process.

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
	root, err := shim.OpenLogRoot(allocDir, filepath.Dir(path))
	if err != nil {
		return nil, time.Time{}, err
	}
	defer root.Close()
	b, err := allocdir.ReadFile(root, filepath.Base(path), maxExitFile)
	if err != nil {
		return nil, time.Time{}, err
	}
	var ex shim.Exit
	if err := json.Unmarshal(b, &ex); err != nil {
		return nil, time.Time{}, fmt.Errorf("decode %s: %w", path, err)
	}
	return exitResultOf(ex), time.Unix(0, ex.At), nil
}

// runningShim is a shim whose task has started: its command, and the
// status pipe on which its exit comes (waitExit).
type runningShim struct {
	cmd    *exec.Cmd
	status *os.File
	lines  *bufio.Reader
}

// maxStatusLine bounds a status line the driver reads from a shim, in
// bytes (an Exit's JSON is under a hundred).
const maxStatusLine = 64 << 10

// waitExit waits for the shim's "exited" status line and returns its
// Exit; ok is false when the shim closed the pipe without one (it died,
// or its exit could not be encoded): the exit file, or the shim's own
// exit, tells then. It closes the status pipe; the caller still reaps the
// shim (cmd.Wait), which exits once its exit file is durable.
func (rs *runningShim) waitExit() (shim.Exit, bool) {
	defer rs.status.Close()
	line, err := rs.lines.ReadString('\n')
	if err != nil {
		return shim.Exit{}, false
	}
	return shim.ParseExited(strings.TrimSuffix(line, "\n"))
}

// startShim starts the task of spec under sh, a shim started and waiting
// for its spec (takeShim), and returns the running shim and the task's
// pid once the shim reported it. A task that could not start returns the
// shim's error message. sh is used up either way.
func startShim(cfg *driver.TaskConfig, spec *shim.Spec, sh *idleShim) (*runningShim, int, error) {
	exitPath := shimExitPath(cfg)
	spec.ExitFile = exitPath
	spec.AllocDir = cfg.AllocDir()
	root, err := shim.OpenLogRoot(spec.AllocDir, cfg.LogDir)
	if err != nil {
		sh.discard()
		return nil, 0, fmt.Errorf("open the task's log directory: %w", err)
	}
	err = root.Remove(filepath.Base(exitPath))
	root.Close()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		sh.discard()
		return nil, 0, fmt.Errorf("remove old exit file: %w", err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		sh.discard()
		return nil, 0, fmt.Errorf("encode shim spec: %w", err)
	}
	// The shim reads the whole spec before it writes its status line, and
	// a pipe holds 64 KiB: write from a goroutine so a larger spec cannot
	// block the start.
	go func() {
		_, _ = sh.spec.Write(specJSON)
		sh.spec.Close()
	}()
	cmd := sh.cmd
	// One reader for both lines: it may hold the exit line already when
	// the task ends at once.
	lines := bufio.NewReader(io.LimitReader(sh.status, maxStatusLine))
	line, rerr := lines.ReadString('\n')
	line = strings.TrimSpace(line)
	if msg, ok := strings.CutPrefix(line, "error "); ok {
		sh.status.Close()
		_ = cmd.Wait()
		return nil, 0, errors.New(msg)
	}
	pidStr, ok := strings.CutPrefix(line, "started ")
	pid, perr := strconv.Atoi(pidStr)
	if !ok || perr != nil || pid <= 0 {
		sh.status.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, 0, fmt.Errorf("task shim did not report a pid (got %q, read error %v)", line, rerr)
	}
	return &runningShim{cmd: cmd, status: sh.status, lines: lines}, pid, nil
}
