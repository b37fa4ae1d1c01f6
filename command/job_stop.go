package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// JobStopCommand stops a job and, unless -detach, monitors the evaluation
// that stops its allocations.
type JobStopCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobStopCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job stop [options] ID

  Stops the job with the given ID (or unique ID prefix): its allocations
  are told to stop. With -purge the job is also removed. It returns once
  the stop's evaluation is done; tasks with a shutdown_delay wait it out
  before they are killed (alloc status shows "Waiting for shutdown
  delay" meanwhile).
` + generalOptions + `
Stop Options:

  -detach
    Return as soon as the stop is submitted; print the evaluation ID.

  -purge
    Remove the job from the cluster's state instead of keeping it as dead.
`)
}

// Synopsis returns a one-line description.
func (c *JobStopCommand) Synopsis() string { return "Stop a running job" }

// Run stops the job.
func (c *JobStopCommand) Run(args []string) int {
	fs := c.Meta.flagSet("job stop", false)
	var detach, purge bool
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&purge, "purge", false, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one argument: the job ID")
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	prefix := fs.Arg(0)
	if strings.TrimSpace(prefix) == "" {
		return c.Meta.errorf("Job ID must not be empty")
	}
	jobs, _, err := client.Jobs().List(&api.QueryOptions{Prefix: prefix})
	if err != nil {
		return c.Meta.errorf("Error querying jobs: %v", err)
	}
	job := pickJob(jobs, prefix)
	if job == nil {
		if len(jobs) == 0 {
			return c.Meta.errorf("No job(s) with prefix or ID %q found", prefix)
		}
		c.Meta.UI.Error(fmt.Sprintf("Prefix matched multiple jobs\n\n%s", c.Meta.jobList(jobs)))
		return 1
	}
	evalID, _, err := client.Jobs().Deregister(job.ID, purge, nil)
	if err != nil {
		return c.Meta.errorf("Error deregistering job: %v", err)
	}
	if detach || evalID == "" {
		c.Meta.UI.Output(fmt.Sprintf("Job %q stopped", job.ID))
		if evalID != "" {
			c.Meta.UI.Output("Evaluation ID: " + evalID)
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return c.Meta.monitor(ctx, client, evalID)
}
