package command

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// JobStatusCommand lists jobs or shows one job with its summary and
// allocations.
type JobStatusCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobStatusCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job status [options] [ID]

  Without an ID, lists every job. With an ID (or a unique ID prefix), shows
  the job, a summary of its allocations by task group and the allocations.
` + generalOptions + `
Status Options:
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *JobStatusCommand) Synopsis() string { return "Display status information about jobs" }

// Run lists jobs or shows one.
func (c *JobStatusCommand) Run(args []string) int {
	fs := c.Meta.flagSet("job status", true)
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() > 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes at most one argument: the job ID")
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	prefix := fs.Arg(0)
	jobs, _, err := client.Jobs().List(&api.QueryOptions{Prefix: prefix})
	if err != nil {
		return c.Meta.errorf("Error querying jobs: %v", err)
	}
	if prefix == "" {
		if c.Meta.jsonOutput {
			return c.Meta.printJSON(jobs)
		}
		if len(jobs) == 0 {
			c.Meta.UI.Output("No running jobs")
			return 0
		}
		c.Meta.UI.Output(c.Meta.jobList(jobs))
		return 0
	}
	job := pickJob(jobs, prefix)
	if job == nil {
		if len(jobs) == 0 {
			return c.Meta.errorf("No job(s) with prefix or ID %q found", prefix)
		}
		c.Meta.UI.Error(fmt.Sprintf("Prefix matched multiple jobs\n\n%s", c.Meta.jobList(jobs)))
		return 1
	}
	return c.Meta.showJob(client, job.ID)
}

// pickJob returns the job whose ID is prefix, or the only job listed.
func pickJob(jobs []*api.JobListStub, prefix string) *api.JobListStub {
	for _, j := range jobs {
		if j.ID == prefix {
			return j
		}
	}
	if len(jobs) == 1 {
		return jobs[0]
	}
	return nil
}

// jobList renders the jobs table.
func (m *Meta) jobList(jobs []*api.JobListStub) string {
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].ID < jobs[j].ID })
	rows := make([][]string, len(jobs))
	for i, j := range jobs {
		rows[i] = []string{j.ID, j.Type, strconv.Itoa(j.Priority), j.Status, m.formatUnixNano(j.SubmitTime)}
	}
	return table([]string{"ID", "Type", "Priority", "Status", "Submit Date"}, rows)
}

// showJob prints one job, its summary and its allocations.
func (m *Meta) showJob(client *api.Client, id string) int {
	job, _, err := client.Jobs().Info(id, nil)
	if err != nil {
		return m.errorf("Error querying job %q: %v", id, err)
	}
	if m.jsonOutput {
		return m.printJSON(job)
	}
	allocs, _, err := client.Jobs().Allocations(id, nil)
	if err != nil {
		return m.errorf("Error querying allocations of job %q: %v", id, err)
	}
	evals, _, err := client.Jobs().Evaluations(id, nil)
	if err != nil {
		return m.errorf("Error querying evaluations of job %q: %v", id, err)
	}
	status := job.Status
	if job.Held {
		status += " (held: the parent's max_running_children are running)"
	}
	rows := [][2]string{
		{"ID", job.ID},
		{"Name", job.Name},
		{"Type", job.Type},
		{"Priority", strconv.Itoa(job.Priority)},
		{"Datacenters", strings.Join(job.Datacenters, ",")},
		{"Status", status},
		{"Submit Date", m.formatUnixNano(job.SubmitTime)},
	}
	if job.ParentID != "" {
		rows = append(rows, [2]string{"Parent", job.ParentID})
	}
	if job.Periodic != nil || (job.ParameterizedJob != nil && !job.Dispatched) {
		return m.showChildren(client, job, rows)
	}
	m.UI.Output(kv(rows))
	m.UI.Output("\nSummary")
	m.UI.Output(jobSummary(job, allocs, evals))
	if blocked := newestBlockedEval(evals); blocked != nil {
		// As Nomad's job status does: say why queued work waits.
		m.UI.Output("\nPlacement Failure")
		for _, tg := range sortedKeys(blocked.FailedTGAllocs) {
			m.UI.Output(fmt.Sprintf("Task Group %q:", tg))
			m.UI.Output(formatAllocMetric(blocked.FailedTGAllocs[tg], "  "))
		}
	}
	// As Nomad's job status does: the newest deployment. A server
	// without the route (or a read error) leaves the section out rather
	// than fail the status.
	if d, _, err := client.Jobs().LatestDeployment(id, nil); err == nil && d != nil {
		m.UI.Output("\nLatest Deployment")
		m.UI.Output(m.formatDeployment(d))
	}
	m.UI.Output("\nAllocations")
	if len(allocs) == 0 {
		m.UI.Output("No allocations placed")
		return 0
	}
	m.UI.Output(m.allocTable(allocs))
	return 0
}

// newestBlockedEval returns the newest blocked evaluation that explains a
// placement failure, or nil.
func newestBlockedEval(evals []*api.Evaluation) *api.Evaluation {
	var newest *api.Evaluation
	for _, e := range evals {
		if e.Status != api.EvalStatusBlocked || len(e.FailedTGAllocs) == 0 {
			continue
		}
		if newest == nil || e.CreateIndex > newest.CreateIndex {
			newest = e
		}
	}
	return newest
}

// jobSummary counts the job's allocations per task group by client status;
// Queued comes from the newest evaluation's QueuedAllocations.
func jobSummary(job *api.Job, allocs []*api.Allocation, evals []*api.Evaluation) string {
	type counts struct{ queued, starting, running, failed, complete, lost int }
	byGroup := map[string]*counts{}
	var order []string
	group := func(name string) *counts {
		c, ok := byGroup[name]
		if !ok {
			c = &counts{}
			byGroup[name] = c
			order = append(order, name)
		}
		return c
	}
	for _, tg := range job.TaskGroups {
		group(tg.Name)
	}
	for _, a := range allocs {
		c := group(a.TaskGroup)
		switch a.ClientStatus {
		case api.AllocClientStatusPending:
			c.starting++
		case api.AllocClientStatusRunning:
			c.running++
		case api.AllocClientStatusFailed:
			c.failed++
		case api.AllocClientStatusComplete:
			c.complete++
		case api.AllocClientStatusLost:
			c.lost++
		}
	}
	var newest *api.Evaluation
	for _, e := range evals {
		if newest == nil || e.CreateIndex > newest.CreateIndex {
			newest = e
		}
	}
	if newest != nil {
		for tg, n := range newest.QueuedAllocations {
			group(tg).queued = n
		}
	}
	rows := make([][]string, 0, len(order))
	for _, name := range order {
		c := byGroup[name]
		rows = append(rows, []string{name, strconv.Itoa(c.queued), strconv.Itoa(c.starting), strconv.Itoa(c.running),
			strconv.Itoa(c.failed), strconv.Itoa(c.complete), strconv.Itoa(c.lost)})
	}
	return table([]string{"Task Group", "Queued", "Starting", "Running", "Failed", "Complete", "Lost"}, rows)
}

// allocTable renders allocations newest first: ID, Node ID, Task Group,
// Desired, Status, Created.
func (m *Meta) allocTable(allocs []*api.Allocation) string {
	sort.SliceStable(allocs, func(i, j int) bool {
		if allocs[i].CreateIndex != allocs[j].CreateIndex {
			return allocs[i].CreateIndex > allocs[j].CreateIndex
		}
		return allocs[i].ID < allocs[j].ID
	})
	rows := make([][]string, len(allocs))
	for i, a := range allocs {
		rows[i] = []string{shortID(a.ID), shortID(a.NodeID), a.TaskGroup, a.DesiredStatus, a.ClientStatus, m.formatUnixNano(a.CreateTime)}
	}
	return table([]string{"ID", "Node ID", "Task Group", "Desired", "Status", "Created"}, rows)
}
