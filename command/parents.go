package command

import (
	"strings"

	"github.com/hashicorp/cli"
)

// JobCommand groups the job subcommands; run alone it prints help.
type JobCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job <subcommand> [options] [args]

  Submit, inspect and stop jobs. Run "gpulayer job <subcommand> -h" for
  the options of one subcommand.
`)
}

// Synopsis returns a one-line description.
func (c *JobCommand) Synopsis() string { return "Interact with jobs" }

// Run prints help.
func (c *JobCommand) Run(args []string) int { return cli.RunResultHelp }

// AllocCommand groups the alloc subcommands; run alone it prints help.
type AllocCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *AllocCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer alloc <subcommand> [options] [args]

  Inspect allocations and read their logs.
`)
}

// Synopsis returns a one-line description.
func (c *AllocCommand) Synopsis() string { return "Interact with allocations" }

// Run prints help.
func (c *AllocCommand) Run(args []string) int { return cli.RunResultHelp }

// NodeCommand groups the node subcommands; run alone it prints help.
type NodeCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodeCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node <subcommand> [options] [args]

  Inspect client nodes and their GPUs.
`)
}

// Synopsis returns a one-line description.
func (c *NodeCommand) Synopsis() string { return "Interact with nodes" }

// Run prints help.
func (c *NodeCommand) Run(args []string) int { return cli.RunResultHelp }
