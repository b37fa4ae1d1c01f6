package command

import (
	"context"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/hashicorp/cli"
)

// AllocStopCommand stops an allocation; the scheduler replaces it.
type AllocStopCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *AllocStopCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer alloc stop [options] ALLOC

  Stops the allocation with the given ID or unique ID prefix. Its job is
  evaluated again, so a service allocation (or a batch allocation that had
  not finished) is replaced.
` + generalOptions)
}

// Synopsis returns a one-line description.
func (c *AllocStopCommand) Synopsis() string { return "Stop and replace an allocation" }

// Run stops the allocation.
func (c *AllocStopCommand) Run(args []string) int {
	fs := c.Meta.flagSet("alloc stop", false)
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	client, alloc, code := c.Meta.allocFromArgs(fs.Args(), false)
	if alloc == nil {
		return code
	}
	resp, err := client.AllocStop(context.Background(), alloc.ID)
	if err != nil {
		return c.Meta.errorf("Error stopping allocation %q: %v", shortID(alloc.ID), err)
	}
	c.Meta.UI.Output("Allocation " + shortID(alloc.ID) + " stopping; evaluation " + shortID(resp.EvalID) + " replaces it")
	return 0
}

// AllocSignalCommand sends a signal to a task.
type AllocSignalCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *AllocSignalCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer alloc signal [options] ALLOC [TASK]

  Sends a signal to the running task TASK of the allocation, or to every
  running task when TASK is omitted.
` + generalOptions + `
Signal Options:

  -s=<signal>
    The signal to send, e.g. SIGHUP or HUP. Default: SIGKILL.
`)
}

// Synopsis returns a one-line description.
func (c *AllocSignalCommand) Synopsis() string { return "Send a signal to a running task" }

// Run sends the signal.
func (c *AllocSignalCommand) Run(args []string) int {
	fs := c.Meta.flagSet("alloc signal", false)
	var sig string
	fs.StringVar(&sig, "s", "SIGKILL", "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	client, alloc, code := c.Meta.allocFromArgs(fs.Args(), true)
	if alloc == nil {
		return code
	}
	if err := client.AllocSignal(context.Background(), alloc.ID, fs.Arg(1), sig); err != nil {
		return c.Meta.errorf("Error signalling allocation %q: %v", shortID(alloc.ID), err)
	}
	return 0
}

// AllocRestartCommand restarts tasks in place.
type AllocRestartCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *AllocRestartCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer alloc restart [options] ALLOC [TASK]

  Restarts the running task TASK of the allocation in place (every running
  task when TASK is omitted): it is stopped with its kill signal and
  started again on the same node. The restart does not count against the
  group's restart policy.
` + generalOptions)
}

// Synopsis returns a one-line description.
func (c *AllocRestartCommand) Synopsis() string { return "Restart a running task in place" }

// Run restarts the tasks.
func (c *AllocRestartCommand) Run(args []string) int {
	fs := c.Meta.flagSet("alloc restart", false)
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	client, alloc, code := c.Meta.allocFromArgs(fs.Args(), true)
	if alloc == nil {
		return code
	}
	if err := client.AllocRestart(context.Background(), alloc.ID, fs.Arg(1)); err != nil {
		return c.Meta.errorf("Error restarting allocation %q: %v", shortID(alloc.ID), err)
	}
	c.Meta.UI.Output("Allocation " + shortID(alloc.ID) + " restarting")
	return 0
}

// AllocExecCommand runs a command inside a running task.
type AllocExecCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *AllocExecCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer alloc exec [options] ALLOC COMMAND [ARGS...]

  Runs COMMAND inside the running task of the allocation: with the task's
  environment (its GPU variables included), in its directory and, for a
  docker task, inside its container. Exits with the command's exit code.
` + generalOptions + `
Exec Options:

  -task=<name>
    The task to run in; required when the allocation runs several.

  -i
    Send this command's stdin to the command. Default true, as in Nomad;
    -i=false sends none.

  -t
    Give the command a terminal (its output then arrives on stdout only).
`)
}

// Synopsis returns a one-line description.
func (c *AllocExecCommand) Synopsis() string { return "Run a command inside a running task" }

// Run runs the command and exits with its code.
func (c *AllocExecCommand) Run(args []string) int {
	fs := c.Meta.flagSet("alloc exec", false)
	var task string
	var stdin, tty bool
	fs.StringVar(&task, "task", "", "")
	fs.BoolVar(&stdin, "i", true, "")
	fs.BoolVar(&tty, "t", false, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() < 2 {
		c.Meta.UI.Error("This command takes an allocation ID and a command to run")
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	out := c.Meta.Stdout
	if out == nil {
		out = os.Stdout
	}
	var in io.Reader
	if stdin {
		in = os.Stdin
	}
	exit, err := client.AllocExec(ctx, alloc.ID, task, fs.Args()[1:], tty, in, out, os.Stderr)
	if err != nil {
		return c.Meta.errorf("Error running %q in allocation %q: %v", fs.Arg(1), shortID(alloc.ID), err)
	}
	return exit
}
