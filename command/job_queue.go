package command

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// JobQueueCommand lists the work waiting to be placed.
type JobQueueCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobQueueCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job queue [options]

  Lists the jobs with allocations waiting to be placed, in the order the
  scheduler places them (higher priority first, then earlier submit time),
  with how many wait per group and why.
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *JobQueueCommand) Synopsis() string {
	return "List waiting work in placement order, and why it waits"
}

// Run lists the queue.
func (c *JobQueueCommand) Run(args []string) int {
	fs := c.Meta.flagSet("job queue", true)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	q, _, err := client.Jobs().Queue(nil)
	if err != nil {
		return c.Meta.errorf("Error reading the queue: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(q)
	}
	if len(q) == 0 {
		c.Meta.UI.Output("No work waiting")
		return 0
	}
	c.Meta.UI.Output(c.renderQueue(q))
	return 0
}

func (c *JobQueueCommand) renderQueue(q []*api.JobQueueEntry) string {
	rows := make([][]string, 0, len(q))
	for i, e := range q {
		groups := make([]string, 0, len(e.Reasons))
		for g := range e.Reasons {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		if len(groups) == 0 {
			groups = []string{""}
		}
		for k, g := range groups {
			pos, job, prio, typ, submitted, status := strconv.Itoa(i+1), e.JobID, strconv.Itoa(e.Priority), e.Type, c.Meta.formatUnixNano(e.SubmitTime), e.Status
			if k > 0 {
				pos, job, prio, typ, submitted, status = "", "", "", "", "", ""
			}
			waiting := ""
			if n := e.Queued[g]; n > 0 {
				waiting = fmt.Sprintf("%s: %d", g, n)
			} else if g != "" {
				waiting = g
			}
			rows = append(rows, []string{pos, job, prio, typ, submitted, status, waiting, e.Reasons[g]})
		}
	}
	return table([]string{"#", "Job", "Priority", "Type", "Submitted", "Status", "Waiting", "Why"}, rows)
}
