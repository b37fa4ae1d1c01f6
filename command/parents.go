package command

import (
	"fmt"
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

// Run prints help; see groupRun.
func (c *JobCommand) Run(args []string) int { return c.Meta.groupRun(args) }

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

// Run prints help; see groupRun.
func (c *AllocCommand) Run(args []string) int { return c.Meta.groupRun(args) }

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

// Run prints help; see groupRun.
func (c *NodeCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// groupRun is the Run of a command that only groups subcommands (job,
// alloc, system, ...). hashicorp/cli hands it the arguments after the
// longest command it found, so a first argument is a word that names no
// subcommand (gpulayer system bogus) or a flag given before one: it says
// which, and in every case asks for the group's help, which lists the
// subcommands; the exit code is then 1.
func (m *Meta) groupRun(args []string) int {
	switch {
	case len(args) == 0:
	case strings.HasPrefix(args[0], "-"):
		m.UI.Error(fmt.Sprintf("unknown flag %q: name a subcommand first, then its options", args[0]))
	default:
		m.UI.Error(fmt.Sprintf("unknown subcommand %q", args[0]))
	}
	return cli.RunResultHelp
}
