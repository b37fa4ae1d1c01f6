package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/hashicorp/cli"
)

// JobRevertCommand registers an older version of a job again (Nomad's
// `job revert`).
type JobRevertCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobRevertCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job revert [options] ID VERSION

  Registers version VERSION of the job with the given ID (or unique ID
  prefix) again, as a new version, and monitors the evaluation unless
  -detach. The version must be one the servers keep (see job history).
` + generalOptions + namespaceOption + `
Revert Options:

  -detach
    Return as soon as the revert is submitted; print the evaluation ID.
`)
}

// Synopsis returns a one-line description.
func (c *JobRevertCommand) Synopsis() string { return "Revert to a prior version of the job" }

// Run reverts the job.
func (c *JobRevertCommand) Run(args []string) int {
	fs := c.Meta.flagSet("job revert", false)
	c.Meta.namespaceFlag(fs)
	var detach bool
	fs.BoolVar(&detach, "detach", false, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 2 {
		return c.Meta.argError(fs, fs.Args(), "This command takes two arguments: the job ID and the version")
	}
	version, err := strconv.ParseUint(fs.Arg(1), 10, 64)
	if err != nil {
		return c.Meta.errorf("VERSION: want a version number, got %q", fs.Arg(1))
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	job, code := c.Meta.lookupJob(client, fs.Arg(0))
	if job == nil {
		return code
	}
	resp, _, err := client.Jobs().Revert(job.ID, version, nil, nil)
	if err != nil {
		return c.Meta.errorf("Error reverting job: %v", err)
	}
	if detach || resp.EvalID == "" {
		c.Meta.UI.Output(fmt.Sprintf("Job %q reverted to version %d", job.ID, version))
		if resp.EvalID != "" {
			c.Meta.UI.Output("Evaluation ID: " + resp.EvalID)
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return c.Meta.monitor(ctx, client, resp.EvalID)
}
