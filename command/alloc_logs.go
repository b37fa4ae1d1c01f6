package command

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// AllocLogsCommand prints (and with -f follows) a task's stdout or stderr.
type AllocLogsCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *AllocLogsCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer alloc logs [options] ALLOC [TASK]

  Prints the stdout (or with -stderr the stderr) of a task of the
  allocation with the given ID or unique ID prefix. TASK may be omitted when
  the allocation's group has one task.
` + generalOptions + `
Logs Options:

  -f
    Follow the log: keep printing new output until the task finishes or
    Ctrl-C.

  -stderr
    Print the task's stderr instead of its stdout.
`)
}

// Synopsis returns a one-line description.
func (c *AllocLogsCommand) Synopsis() string { return "Stream the logs of a task" }

// Run streams the log to Meta.Stdout.
func (c *AllocLogsCommand) Run(args []string) int {
	fs := c.Meta.flagSet("alloc logs", false)
	var follow, stderr bool
	fs.BoolVar(&follow, "f", false, "")
	fs.BoolVar(&stderr, "stderr", false, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		c.Meta.UI.Error("This command takes one or two arguments: the allocation ID and the task")
		return cli.RunResultHelp
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	alloc, code := c.Meta.resolveAlloc(client, fs.Arg(0))
	if alloc == nil {
		return code
	}
	task := fs.Arg(1)
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
	rc, err := client.AllocFS().Logs(ctx, alloc.ID, task, logType, follow)
	if err != nil {
		return c.Meta.errorf("Error reading logs of task %q: %v", task, err)
	}
	defer rc.Close()
	if _, err := io.Copy(c.Meta.Stdout, rc); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return c.Meta.errorf("Error reading logs of task %q: %v", task, err)
	}
	return 0
}
