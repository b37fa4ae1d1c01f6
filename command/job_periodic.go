package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/hashicorp/cli"
)

// JobPeriodicCommand groups the periodic subcommands; run alone it prints
// help.
type JobPeriodicCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobPeriodicCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job periodic <subcommand> [options] [args]

  Interact with periodic jobs. Run "gpulayer job periodic force -h" for
  its options.
`)
}

// Synopsis returns a one-line description.
func (c *JobPeriodicCommand) Synopsis() string { return "Interact with periodic jobs" }

// Run prints help; see groupRun.
func (c *JobPeriodicCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// JobPeriodicForceCommand launches a periodic job now (Nomad's `job
// periodic force`).
type JobPeriodicForceCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobPeriodicForceCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job periodic force [options] JOB

  Launches a child of the periodic job JOB now, outside its schedule,
  named JOB/periodic-<unix>. prohibit_overlap does not stop a forced
  launch; max_running_children holds it until a running child finishes.
  Unless -detach, the child's evaluation is monitored.
` + generalOptions + `
Force Options:

  -detach
    Return as soon as the child is created; print its evaluation ID.
`)
}

// Synopsis returns a one-line description.
func (c *JobPeriodicForceCommand) Synopsis() string { return "Force the launch of a periodic job" }

// Run forces the launch.
func (c *JobPeriodicForceCommand) Run(args []string) int {
	fs := c.Meta.flagSet("job periodic force", false)
	var detach bool
	fs.BoolVar(&detach, "detach", false, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one argument: the periodic job's ID")
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	resp, _, err := client.Jobs().PeriodicForce(fs.Arg(0), nil)
	if err != nil {
		return c.Meta.errorf("Error forcing periodic job: %v", err)
	}
	if resp.EvalID == "" {
		c.Meta.UI.Output("Launched; the child is held until a running child finishes (max_running_children)")
		return 0
	}
	c.Meta.UI.Output(fmt.Sprintf("Evaluation ID: %s", resp.EvalID))
	if detach {
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return c.Meta.monitor(ctx, client, resp.EvalID)
}
