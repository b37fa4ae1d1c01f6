package command

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// AllocLogsCommand prints (and with -f follows) a task's stdout or stderr.
type AllocLogsCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *AllocLogsCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer alloc logs [options] ALLOC [TASK]
       gpulayer alloc logs [options] -job JOB [TASK]

  Prints the stdout (or with -stderr the stderr) of a task of the
  allocation with the given ID or unique ID prefix, or with -job of the
  job's most recently created allocation. TASK may be omitted when the
  allocation's group has one task.
` + generalOptions + `
Logs Options:

  -f
    Follow the log: keep printing new output until the task finishes or
    Ctrl-C. If the stream ends while the task still runs (the agent
    stopped), a note says so on stderr and the exit code is 1.

  -stderr
    Print the task's stderr instead of its stdout.

  -job=<job-id>
    Use the job's most recently created allocation instead of naming one.

  -tail
    Print only the end of the log: its last 10 lines, or as set by -n or
    -c. With -f, follow from there.

  -n=<lines>
    With -tail (implied when -n is given), the number of lines to print.

  -c=<bytes>
    With -tail (implied when -c is given), the number of bytes to print
    instead of lines.
`)
}

// Synopsis returns a one-line description.
func (c *AllocLogsCommand) Synopsis() string { return "Stream the logs of a task" }

// Run streams the log to Meta.Stdout.
func (c *AllocLogsCommand) Run(args []string) int {
	fs := c.Meta.flagSet("alloc logs", false)
	var follow, stderr bool
	var jobID string
	fs.BoolVar(&follow, "f", false, "")
	fs.BoolVar(&stderr, "stderr", false, "")
	fs.StringVar(&jobID, "job", "", "")
	var tail bool
	var tailLines int
	var tailBytes int64
	fs.BoolVar(&tail, "tail", false, "")
	fs.IntVar(&tailLines, "n", -1, "")
	fs.Int64Var(&tailBytes, "c", -1, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	switch {
	case tailLines == 0 || tailLines < -1:
		return c.Meta.errorf("Invalid -n=%d: want a positive number of lines", tailLines)
	case tailBytes == 0 || tailBytes < -1:
		return c.Meta.errorf("Invalid -c=%d: want a positive number of bytes", tailBytes)
	case tailLines > 0 && tailBytes > 0:
		return c.Meta.errorf("-n and -c cannot be used together")
	}
	if tailLines > 0 || tailBytes > 0 {
		tail = true
	}
	if tail && tailLines < 0 && tailBytes < 0 {
		tailLines = 10
	}
	args = fs.Args()
	if jobID != "" {
		if len(args) > 1 {
			return c.Meta.argError(fs, args, "With -job this command takes at most one argument: the task")
		}
	} else if len(args) < 1 || len(args) > 2 {
		return c.Meta.argError(fs, args, "This command takes one or two arguments: the allocation ID and the task")
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	if jobID != "" {
		var alloc *api.Allocation
		allocs, _, err := client.Jobs().Allocations(jobID, nil)
		if err != nil {
			return c.Meta.errorf("Error listing allocations of job %q: %v", jobID, err)
		}
		// With a task named, only the groups that have it qualify.
		groups := map[string]bool{}
		if len(args) == 1 {
			job, _, err := client.Jobs().Info(jobID, nil)
			if err != nil {
				return c.Meta.errorf("Error querying job %q: %v", jobID, err)
			}
			for _, tg := range job.TaskGroups {
				for _, t := range tg.Tasks {
					if t.Name == args[0] {
						groups[tg.Name] = true
					}
				}
			}
			if len(groups) == 0 {
				return c.Meta.errorf("Job %q has no task %q", jobID, args[0])
			}
		}
		for _, a := range allocs {
			if len(groups) > 0 && !groups[a.TaskGroup] {
				continue
			}
			if alloc == nil || a.CreateIndex > alloc.CreateIndex {
				alloc = a
			}
		}
		if alloc == nil && len(allocs) == 0 {
			// The allocations of a job that does not exist are an empty
			// list: ask for the job to tell the two apart.
			if _, _, err := client.Jobs().Info(jobID, nil); api.IsNotFound(err) {
				return c.Meta.errorf("Error: job %q not found", jobID)
			} else if err != nil {
				return c.Meta.errorf("Error querying job %q: %v", jobID, err)
			}
		}
		if alloc == nil {
			return c.Meta.errorf("Job %q has no allocations", jobID)
		}
		args = append([]string{alloc.ID}, args...)
	}
	var alloc *api.Allocation
	if len(args) > 1 && isFullAllocID(args[0]) {
		// A full ID with a task: ask for the logs even when the servers
		// no longer list the allocation (collected): they answer from
		// its log archive.
		if a, _, err := client.Allocations().Info(args[0], nil); err == nil {
			alloc = a
		} else if api.IsNotFound(err) {
			alloc = &api.Allocation{ID: args[0]}
		}
	}
	if alloc == nil {
		var code int
		if alloc, code = c.Meta.resolveAlloc(client, args[0]); alloc == nil {
			return code
		}
	}
	task := ""
	if len(args) > 1 {
		task = args[1]
	}
	if task == "" {
		names := allocTaskNames(alloc)
		if len(names) != 1 {
			return c.Meta.errorf("Allocation %q has tasks %s; name one: gpulayer alloc logs %s TASK",
				shortID(alloc.ID), strings.Join(names, ", "), shortID(alloc.ID))
		}
		task = names[0]
	}
	logType := api.LogTypeStdout
	if stderr {
		logType = api.LogTypeStderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var rc io.ReadCloser
	if tail {
		rc, err = client.AllocFS().LogsTail(ctx, alloc.ID, task, logType, follow, max(tailLines, 0), max(tailBytes, 0))
	} else {
		rc, err = client.AllocFS().Logs(ctx, alloc.ID, task, logType, follow)
	}
	if err != nil {
		return c.Meta.errorf("Error reading logs of task %q: %v", task, err)
	}
	defer rc.Close()
	if _, err := io.Copy(c.Meta.Stdout, rc); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return c.Meta.errorf("Error reading logs of task %q: %v", task, err)
	}
	if !follow || ctx.Err() != nil {
		return 0
	}
	// A followed stream ends when the task finishes, but also when the
	// agent serving it stops: tell the two apart by the task's state.
	finished, status, err := c.Meta.taskFinished(ctx, client, alloc.ID, task)
	switch {
	case ctx.Err() != nil:
		return 0
	case err != nil:
		return c.Meta.errorf("Log stream of task %q ended, and allocation %q cannot be read (%v): the agent may have stopped; the task may still be running",
			task, shortID(alloc.ID), err)
	case !finished:
		return c.Meta.errorf("Log stream of task %q ended while the task is still %s: the agent may have stopped or restarted; run the command again to resume",
			task, status)
	}
	return 0
}

// logSettleWait bounds how long alloc logs -f waits, once a followed log
// stream has ended, for the server to hear from the client that the task
// finished: the client reports a task's end moments after closing its log.
const logSettleWait = 5 * time.Second

// taskFinished reports whether task of the allocation allocID has finished:
// its state is dead, or the allocation is complete, failed or lost. While
// the server still shows the task running it waits for a change with
// blocking queries, for at most logSettleWait; a server that answers
// without blocking is asked once more. status is the task's last state seen
// (or the allocation's client status when the task has none). The error is
// the API's, for instance when the agent no longer answers.
func (m *Meta) taskFinished(ctx context.Context, client *api.Client, allocID, task string) (finished bool, status string, err error) {
	ctx, cancel := context.WithTimeout(ctx, logSettleWait)
	defer cancel()
	var index uint64
	for {
		a, meta, err := client.Allocations().Info(allocID, &api.QueryOptions{WaitIndex: index, WaitTime: logSettleWait, Context: ctx})
		if err != nil {
			if index > 0 && ctx.Err() != nil {
				// Waited the whole time without a change.
				return false, status, nil
			}
			return false, status, err
		}
		status = a.ClientStatus
		if ts := a.TaskStates[task]; ts != nil && ts.State != "" {
			status = ts.State
			if ts.State == api.TaskStateDead {
				return true, status, nil
			}
		}
		if a.ClientTerminalStatus() {
			return true, status, nil
		}
		if index > 0 && meta.LastIndex <= index {
			return false, status, nil
		}
		index = meta.LastIndex
	}
}

// isFullAllocID reports whether s has the shape of a whole allocation ID
// (a UUID: 36 characters, dashes at 8, 13, 18 and 23, hex elsewhere).
func isFullAllocID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}
