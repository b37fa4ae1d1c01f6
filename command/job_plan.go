package command

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// JobPlanCommand shows what running a jobspec would do, changing nothing.
type JobPlanCommand struct{ Meta *Meta }

// Exit codes of job plan.
const (
	planExitFits   = 0 // every allocation would be placed
	planExitError  = 1
	planExitQueued = 2 // some allocations would wait
)

// Help returns the command's usage.
func (c *JobPlanCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job plan [options] FILE

  Parses the jobspec FILE and asks the scheduler what registering it would
  do, without registering it: the changes against the running version,
  and per group where allocations would go (node and count) or why they
  would wait, per reason with node counts ("5 nodes: not enough free GPU
  memory (nvidia/gpu); 2: reserved 'voice'; 1: opportunistic node"), and
  which lower-priority allocations would be preempted.

  Exits 0 when every allocation would be placed, 2 when some would wait,
  1 on error.
` + generalOptions + namespaceOption + `
Plan Options:

  -var 'name=value'
    A value for a jobspec variable; may be repeated.

  -var-file=<path>
    An HCL file of variable values.
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *JobPlanCommand) Synopsis() string { return "Show where a job would be placed, or why not" }

// Run plans the job.
func (c *JobPlanCommand) Run(args []string) int {
	fs := c.Meta.flagSet("job plan", true)
	jf := addJobFileOptions(fs)
	job, client, code := c.Meta.jobFileAndClient(fs, args, jf)
	if job == nil || client == nil {
		return code
	}
	plan, err := client.Jobs().Plan(job)
	if err != nil {
		return c.Meta.jobSubmitError("Error planning job", err, jf.positions)
	}
	code = planExitFits
	for _, g := range plan.Groups {
		if g.Queued > 0 {
			code = planExitQueued
		}
	}
	if c.Meta.jsonOutput {
		if rc := c.Meta.printJSON(plan); rc != 0 {
			return planExitError
		}
		return code
	}
	c.Meta.UI.Output(renderPlan(job, plan))
	return code
}

// renderPlan formats a plan for people.
func renderPlan(job *api.Job, plan *api.JobPlanResponse) string {
	var b strings.Builder
	if plan.JobModifyIndex == 0 {
		fmt.Fprintf(&b, "Job %q (new)\n", job.ID)
	} else {
		fmt.Fprintf(&b, "Job %q (running version at index %d)\n", job.ID, plan.JobModifyIndex)
	}
	if plan.JobModifyIndex != 0 {
		b.WriteString("\nChanges:\n")
		if len(plan.DiffLines) == 0 {
			b.WriteString("  (none)\n")
		}
		for _, d := range plan.DiffLines {
			b.WriteString("  " + d + "\n")
		}
	}
	counts := map[string]int{}
	for _, tg := range job.TaskGroups {
		if tg != nil {
			counts[tg.Name] = tg.Count
		}
	}
	for _, g := range plan.Groups {
		fmt.Fprintf(&b, "\nGroup %q (count %d):\n", g.Name, counts[g.Name])
		if g.Place > 0 {
			nodes := make([]string, 0, len(g.Nodes))
			for _, n := range sortedKeys(g.Nodes) {
				nodes = append(nodes, fmt.Sprintf("%s (%d)", n, g.Nodes[n]))
			}
			fmt.Fprintf(&b, "  place %d on %s\n", g.Place, strings.Join(nodes, ", "))
		}
		if g.InPlace > 0 {
			fmt.Fprintf(&b, "  update %d in place (same node and devices)\n", g.InPlace)
		}
		if g.Stop > 0 {
			fmt.Fprintf(&b, "  stop %d\n", g.Stop)
		}
		if g.Queued > 0 {
			why := "no reason recorded"
			if g.Failure != nil && g.Failure.Explanation != "" {
				why = g.Failure.Explanation
			}
			fmt.Fprintf(&b, "  %d would wait: %s\n", g.Queued, why)
		}
		for _, n := range g.Notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
		if g.Place+g.InPlace+g.Stop+g.Queued == 0 && len(g.Notes) == 0 {
			b.WriteString("  no change\n")
		}
	}
	if len(plan.Preemptions) > 0 {
		p := append([]string(nil), plan.Preemptions...)
		sort.Strings(p)
		b.WriteString("\nWould preempt (lower-priority batch allocations, requeued):\n")
		for _, s := range p {
			b.WriteString("  " + s + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
