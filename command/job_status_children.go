package command

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// showChildren prints the job's header rows with its periodic or
// parameterized settings aligned beneath them (one block, as Nomad's CLI
// does), then its children (listed as Nomad's CLI does, by the prefix
// "<job>/"): a count by status and one row per child, oldest first.
func (m *Meta) showChildren(client *api.Client, job *api.Job, header [][2]string) int {
	info := header
	if p := job.Periodic; p != nil {
		specs := p.Specs
		if p.Spec != "" {
			specs = append([]string{p.Spec}, specs...)
		}
		enabled := p.Enabled == nil || *p.Enabled
		info = append(info, [2]string{"Periodic", strings.Join(specs, ", ")},
			[2]string{"Enabled", strconv.FormatBool(enabled)},
			[2]string{"Prohibit Overlap", strconv.FormatBool(p.ProhibitOverlap)})
		if p.TimeZone != "" {
			info = append(info, [2]string{"Time Zone", p.TimeZone})
		}
	}
	if p := job.ParameterizedJob; p != nil {
		info = append(info, [2]string{"Parameterized", "payload " + p.Payload},
			[2]string{"Meta Required", strings.Join(p.MetaRequired, ",")},
			[2]string{"Meta Optional", strings.Join(p.MetaOptional, ",")})
	}
	limit := "none"
	if job.MaxRunningChildren > 0 {
		limit = strconv.Itoa(job.MaxRunningChildren)
	}
	info = append(info, [2]string{"Max Running Children", limit})
	m.UI.Output(kv(info))
	listed, _, err := client.Jobs().List(&api.QueryOptions{Prefix: job.ID + "/"})
	if err != nil {
		return m.errorf("Error querying children of job %q: %v", job.ID, err)
	}
	var children []*api.JobListStub
	for _, c := range listed {
		if c.ParentID == job.ID {
			children = append(children, c)
		}
	}
	sort.SliceStable(children, func(i, j int) bool { return children[i].CreateIndex < children[j].CreateIndex })
	var held, pending, running, dead int
	rows := make([][]string, 0, len(children))
	for _, c := range children {
		status := c.Status
		switch {
		case c.Held:
			held++
			status = "held"
		case c.Status == "pending":
			pending++
		case c.Status == "running":
			running++
		default:
			dead++
		}
		rows = append(rows, []string{c.ID, status, m.formatUnixNano(c.SubmitTime)})
	}
	m.UI.Output("\nChildren Job Summary")
	m.UI.Output(table([]string{"Held", "Pending", "Running", "Dead"},
		[][]string{{strconv.Itoa(held), strconv.Itoa(pending), strconv.Itoa(running), strconv.Itoa(dead)}}))
	title := "\nDispatched Jobs"
	if job.Periodic != nil {
		title = "\nPreviously Launched Jobs"
	}
	m.UI.Output(title)
	if len(rows) == 0 {
		m.UI.Output(fmt.Sprintf("No children of %q yet", job.ID))
		return 0
	}
	m.UI.Output(table([]string{"ID", "Status", "Submit Date"}, rows))
	return 0
}

// parentJobHint says, after a periodic or parameterized job is registered
// (a parent, never placed itself, so there is no evaluation to monitor),
// what launches its children and which commands show and start them; ""
// for other jobs.
func parentJobHint(job *api.Job) string {
	switch {
	case job.Periodic != nil:
		p := job.Periodic
		specs := p.Specs
		if p.Spec != "" {
			specs = append([]string{p.Spec}, specs...)
		}
		zone := p.TimeZone
		if zone == "" {
			zone = "UTC"
		}
		when := fmt.Sprintf("Periodic job: a child is launched at each time of %s (%s)", strings.Join(specs, ", "), zone)
		if p.Enabled != nil && !*p.Enabled {
			when = "Periodic job, disabled (enabled = false): no child is launched on schedule"
		}
		return fmt.Sprintf("%s; `gpulayer job periodic force %s` launches one now, `gpulayer job status %s` lists them", when, job.ID, job.ID)
	case job.ParameterizedJob != nil:
		return fmt.Sprintf("Parameterized job: nothing runs until `gpulayer job dispatch %s` creates a child; `gpulayer job status %s` lists them", job.ID, job.ID)
	}
	return ""
}
