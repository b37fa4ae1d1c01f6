package command

import (
	"fmt"
	"strings"
)

// SystemCommand groups the system subcommands; run alone it prints help.
type SystemCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *SystemCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer system <subcommand> [options]

  Cluster-wide maintenance: "system gc" collects garbage now.
`)
}

// Synopsis returns a one-line description.
func (c *SystemCommand) Synopsis() string { return "Interact with the system API" }

// Run prints help; see groupRun.
func (c *SystemCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// SystemGCCommand forces a garbage collection (PUT /v1/system/gc).
type SystemGCCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *SystemGCCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer system gc [options]

  Collects garbage now, as if every GC threshold were zero: terminal
  evaluations, finished allocations (with their directories on the
  clients), stopped jobs, finished batch jobs and down nodes are removed
  whatever their age, and so are artifacts no job or allocation
  references. Nothing that still runs is removed, and a batch job
  that has not finished keeps its finished allocations so they do not run
  again. The leader also collects on its own every 5 minutes, with the
  thresholds described in the documentation ("Garbage collection").
` + generalOptions + `
GC Options:
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *SystemGCCommand) Synopsis() string { return "Run the system garbage collection process" }

// Run forces the collection and prints what it removed.
func (c *SystemGCCommand) Run(args []string) int {
	fs := c.Meta.flagSet("system gc", true)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	res, err := client.System().GarbageCollectCounts(nil)
	if err != nil {
		return c.Meta.errorf("Error running system garbage-collection: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(res)
	}
	msg := fmt.Sprintf("Garbage collected %s, %s, %s and %s",
		plural(res.Evals, "evaluation"), plural(res.Allocs, "allocation"), plural(res.Jobs, "job"), plural(res.Nodes, "node"))
	if res.Artifacts > 0 {
		msg += fmt.Sprintf(", and %s", plural(res.Artifacts, "unreferenced artifact"))
	}
	c.Meta.UI.Output(msg)
	return 0
}

// plural renders "1 job", "2 jobs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
