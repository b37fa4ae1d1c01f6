package command

import (
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// StatusCommand lists jobs, or shows the job, allocation or node whose ID
// starts with the argument.
type StatusCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *StatusCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer status [options] [ID]

  Without an ID, lists every job (as "gpulayer job status"). With an ID or
  ID prefix, shows the matching job, else allocation, else node.
` + generalOptions + `
Status Options:
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *StatusCommand) Synopsis() string { return "Display the status of jobs, allocations or nodes" }

// Run dispatches on what the ID names.
func (c *StatusCommand) Run(args []string) int {
	fs := c.Meta.flagSet("status", true)
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() > 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes at most one argument: an ID or ID prefix")
	}
	rest := fs.Args()
	if c.Meta.jsonOutput {
		rest = append([]string{"-json"}, rest...)
	}
	rest = append([]string{"-address", c.Meta.address}, rest...)
	if fs.NArg() == 0 {
		return (&JobStatusCommand{Meta: c.Meta}).Run(rest)
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	prefix := fs.Arg(0)
	q := &api.QueryOptions{Prefix: prefix}
	if jobs, _, err := client.Jobs().List(q); err != nil {
		return c.Meta.errorf("Error querying jobs: %v", err)
	} else if len(jobs) > 0 {
		return (&JobStatusCommand{Meta: c.Meta}).Run(rest)
	}
	if allocs, _, err := client.Allocations().List(q); err != nil {
		return c.Meta.errorf("Error querying allocations: %v", err)
	} else if len(allocs) > 0 {
		return (&AllocStatusCommand{Meta: c.Meta}).Run(rest)
	}
	if nodes, _, err := client.Nodes().List(q); err != nil {
		return c.Meta.errorf("Error querying nodes: %v", err)
	} else if len(nodes) > 0 {
		return (&NodeStatusCommand{Meta: c.Meta}).Run(rest)
	}
	return c.Meta.errorf("No job, allocation or node matches %q", prefix)
}
