package client

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// runningTasks returns the runners of the allocation's running tasks:
// the one named task, or every running task when task is empty. Errors
// wrap structs.ErrNotFound for an unknown allocation or task and
// structs.ErrInvalid for a named task that is not running.
func (c *Client) runningTasks(allocID, task string) (*allocRunner, []*taskRunner, error) {
	if !pathElem(allocID) {
		return nil, nil, fmt.Errorf("%w: allocation %q", structs.ErrNotFound, allocID)
	}
	c.mu.Lock()
	ar := c.runners[allocID]
	c.mu.Unlock()
	if ar == nil {
		return nil, nil, fmt.Errorf("%w: allocation %s does not run on this node", structs.ErrNotFound, allocID)
	}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	var names []string
	for name := range ar.tasks {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []*taskRunner
	for _, name := range names {
		if task != "" && name != task {
			continue
		}
		ts := ar.taskStates[name]
		if ts == nil || ts.State != structs.TaskStateRunning {
			if task != "" {
				return nil, nil, fmt.Errorf("%w: task %q of allocation %s is not running", structs.ErrInvalid, task, allocID)
			}
			continue
		}
		out = append(out, ar.tasks[name])
	}
	if task != "" && len(out) == 0 {
		return nil, nil, fmt.Errorf("%w: task %q in allocation %s", structs.ErrNotFound, task, allocID)
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("%w: allocation %s has no running task", structs.ErrInvalid, allocID)
	}
	return ar, out, nil
}

func (tr *taskRunner) taskID() string { return tr.alloc.ID + "/" + tr.task.Name }

// AllocSignal sends signal ("SIGHUP" or "HUP") to the named running task
// of an allocation, or to all its running tasks when task is empty, and
// records a "Signaling" task event. Errors wrap structs.ErrNotFound for an
// unknown allocation or task, and structs.ErrInvalid for a task not
// running, a driver that cannot signal, or an unknown signal.
func (c *Client) AllocSignal(ctx context.Context, allocID, task, signal string) error {
	_, trs, err := c.runningTasks(allocID, task)
	if err != nil {
		return err
	}
	for _, tr := range trs {
		s, ok := tr.drv.(driver.Signaler)
		if !ok {
			return fmt.Errorf("%w: the %s driver cannot signal tasks", structs.ErrInvalid, tr.drv.Name())
		}
		if err := s.SignalTask(tr.taskID(), signal); err != nil {
			return fmt.Errorf("signal task %q: %w", tr.task.Name, err)
		}
		tr.setState(tr.event("Signaling", "Task being sent signal "+signal, nil), nil)
	}
	return nil
}

// AllocRestart stops the named running task (or every running task when
// task is empty) with its kill signal and starts it again in place. The
// restart does not count against the restart policy. Errors are those of
// AllocSignal.
func (c *Client) AllocRestart(ctx context.Context, allocID, task string) error {
	_, trs, err := c.runningTasks(allocID, task)
	if err != nil {
		return err
	}
	for _, tr := range trs {
		if !tr.requestRestart() {
			return fmt.Errorf("%w: task %q is already restarting or stopping", structs.ErrInvalid, tr.task.Name)
		}
	}
	return nil
}

// AllocExec runs cmd inside the running task's environment (its
// variables, including the GPU ones, its directory and, for docker, its
// container) and returns the command's exit code. task may be empty when
// the allocation runs one task; with tty the command gets a terminal.
// Errors wrap structs.ErrNotFound for an unknown allocation or task, and
// structs.ErrInvalid for an empty command, a task not running, an
// allocation with several running tasks and no task named, or a driver
// that cannot exec.
func (c *Client) AllocExec(ctx context.Context, allocID, task string, cmd []string, tty bool, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(cmd) == 0 || cmd[0] == "" {
		return -1, fmt.Errorf("%w: exec needs a command", structs.ErrInvalid)
	}
	_, trs, err := c.runningTasks(allocID, task)
	if err != nil {
		return -1, err
	}
	if len(trs) > 1 {
		names := make([]string, len(trs))
		for i, tr := range trs {
			names[i] = tr.task.Name
		}
		return -1, fmt.Errorf("%w: allocation %s runs tasks %v: name one", structs.ErrInvalid, allocID, names)
	}
	tr := trs[0]
	ex, ok := tr.drv.(driver.Execer)
	if !ok {
		return -1, fmt.Errorf("%w: the %s driver cannot exec", structs.ErrInvalid, tr.drv.Name())
	}
	tr.logger.Info("exec in task", "command", cmd[0], "tty", tty)
	return ex.ExecTask(ctx, tr.taskID(), &driver.ExecOptions{Cmd: cmd, Tty: tty, Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// AllocNamespace returns the namespace of an allocation this client runs,
// and false when it runs no allocation of that ID. The HTTP API uses it to
// check a token's namespace capability on a client-only agent.
func (c *Client) AllocNamespace(allocID string) (string, bool) {
	c.mu.Lock()
	ar := c.runners[allocID]
	c.mu.Unlock()
	if ar == nil || ar.alloc == nil {
		return "", false
	}
	ns := ar.alloc.Namespace
	if ns == "" && ar.alloc.Job != nil {
		ns = ar.alloc.Job.Namespace
	}
	if ns == "" {
		ns = "default"
	}
	return ns, true
}
