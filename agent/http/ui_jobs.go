package http

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// allocCounts counts allocations by client status.
type allocCounts struct {
	Pending, Running, Complete, Failed, Lost, Total int
}

func (c *allocCounts) add(a *structs.Allocation) {
	c.Total++
	switch a.ClientStatus {
	case structs.AllocClientStatusPending:
		c.Pending++
	case structs.AllocClientStatusRunning:
		c.Running++
	case structs.AllocClientStatusComplete:
		c.Complete++
	case structs.AllocClientStatusFailed:
		c.Failed++
	case structs.AllocClientStatusLost:
		c.Lost++
	}
}

// countItem is a named count for summaries.
type countItem struct {
	Name  string
	Count int
}

// jobRow is a line of the jobs page.
type jobRow struct {
	ID, Name, Type, Status string
	Priority               int
	Stopped                bool
	Allocs                 allocCounts
	Queued                 int
	QueuedReason           string
}

type jobsView struct {
	pageBase
	Jobs         []jobRow
	StatusCounts []countItem
}

// queuedCount is how many allocations of the job's groups wait to be
// placed, as the CLI's job status and the evaluations say it: the newest
// evaluation's QueuedAllocations per group. A stopped job queues nothing,
// and neither does a group whose failed allocations the scheduler will not
// replace (a dead batch job): counting the group's count less its live
// allocations would call those queued, which no evaluation says.
func queuedCount(job *structs.Job, evals []*structs.Evaluation) (total int, byGroup map[string]int) {
	byGroup = map[string]int{}
	if job.Stop {
		return 0, byGroup
	}
	var newest *structs.Evaluation
	for _, e := range evals {
		if e != nil && (newest == nil || e.CreateIndex > newest.CreateIndex) {
			newest = e
		}
	}
	if newest == nil {
		return 0, byGroup
	}
	for _, tg := range job.TaskGroups {
		if tg == nil {
			continue
		}
		if q := newest.QueuedAllocations[tg.Name]; q > 0 {
			byGroup[tg.Name] = q
			total += q
		}
	}
	return total, byGroup
}

// placementReasons explains an AllocMetric in words, most frequent first:
// constraint filters, then exhausted dimensions.
func placementReasons(m *structs.AllocMetric) []string {
	if m == nil {
		return nil
	}
	type kv struct {
		k string
		v int
	}
	var items []kv
	for k, v := range m.ConstraintFiltered {
		items = append(items, kv{"filtered by " + k, v})
	}
	for k, v := range m.DimensionExhausted {
		items = append(items, kv{"not enough " + k, v})
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].v != items[j].v {
			return items[i].v > items[j].v
		}
		return items[i].k < items[j].k
	})
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, fmt.Sprintf("%s (%d %s)", it.k, it.v, plural(it.v, "node", "nodes")))
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// queuedReason is the newest evaluation's explanation of why the job's
// groups are not placed, in one line.
func queuedReason(evals []*structs.Evaluation) string {
	var newest *structs.Evaluation
	for _, e := range evals {
		if len(e.FailedTGAllocs) == 0 {
			continue
		}
		if newest == nil || e.CreateIndex > newest.CreateIndex {
			newest = e
		}
	}
	if newest == nil {
		return ""
	}
	groups := make([]string, 0, len(newest.FailedTGAllocs))
	for g := range newest.FailedTGAllocs {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var parts []string
	for _, g := range groups {
		rs := placementReasons(newest.FailedTGAllocs[g])
		if len(rs) > 2 {
			rs = rs[:2]
		}
		if len(rs) == 0 {
			rs = []string{"no node is ready"}
		}
		parts = append(parts, g+": "+strings.Join(rs, ", "))
	}
	return strings.Join(parts, "; ")
}

func (u *ui) jobsPage(r *http.Request) (string, pageData, error) {
	q := &structs.QueryOptions{AllowStale: true}
	jobs, _, err := u.h.srv.JobList(r.Context(), q)
	if err != nil {
		return "", nil, err
	}
	allocs, _, err := u.h.srv.AllocList(r.Context(), q)
	if err != nil {
		return "", nil, err
	}
	// Only the namespaces the caller's token may read (auth.go).
	jobs = visible(r, jobs, structs.NamespaceCapabilityListJobs, func(j *structs.Job) string { return j.Namespace })
	allocs = visible(r, allocs, structs.NamespaceCapabilityReadJob, allocNamespace)
	byJob := map[string][]*structs.Allocation{}
	for _, a := range allocs {
		byJob[a.JobID] = append(byJob[a.JobID], a)
	}
	v := &jobsView{pageBase: pageBase{Nav: "jobs", StreamTopics: []string{structs.TopicJob, structs.TopicAllocation, structs.TopicEvaluation}}}
	status := map[string]int{}
	for _, j := range jobs {
		row := jobRow{ID: j.ID, Name: j.Name, Type: j.Type, Status: j.Status, Priority: j.Priority, Stopped: j.Stop}
		for _, a := range byJob[j.ID] {
			row.Allocs.add(a)
		}
		evals, _, err := u.h.srv.JobEvaluations(r.Context(), j.ID, q)
		if err != nil {
			return "", nil, err
		}
		row.Queued, _ = queuedCount(j, evals)
		if row.Queued > 0 {
			row.QueuedReason = queuedReason(evals)
		}
		status[j.Status]++
		v.Jobs = append(v.Jobs, row)
	}
	for _, s := range []string{structs.JobStatusRunning, structs.JobStatusPending, structs.JobStatusDead} {
		if status[s] > 0 {
			v.StatusCounts = append(v.StatusCounts, countItem{s, status[s]})
		}
	}
	return "jobs", v, nil
}

type taskSummary struct {
	Name, Driver  string
	CPU, MemoryMB int
	Devices       string
}

type groupRow struct {
	Name   string
	Count  int
	Gang   bool
	Tasks  []taskSummary
	Allocs allocCounts
	Queued int
}

type evalFailure struct {
	Group                          string
	Evaluated, Filtered, Exhausted int
	Coalesced                      int
	Reasons                        []string
}

type evalRow struct {
	ID, Short, Status, TriggeredBy, StatusDescription, Created string
	Blocked                                                    string
	Queued                                                     []string
	Failures                                                   []evalFailure
}

type jobView struct {
	pageBase
	Job    *structs.Job
	Groups []groupRow
	Allocs []allocRow
	Evals  []evalRow
	// Versions and Deployment: ui_deployments.go.
	Versions   []versionRow
	Deployment *deploymentView
}

func (u *ui) jobPage(r *http.Request) (string, pageData, error) {
	id := r.PathValue("id")
	q := &structs.QueryOptions{AllowStale: true}
	job, _, err := u.h.srv.JobGet(r.Context(), id, q)
	if err != nil {
		return "", nil, err
	}
	allocs, _, err := u.h.srv.JobAllocations(r.Context(), id, q)
	if err != nil {
		return "", nil, err
	}
	evals, _, err := u.h.srv.JobEvaluations(r.Context(), id, q)
	if err != nil {
		return "", nil, err
	}
	v := &jobView{pageBase: pageBase{Nav: "jobs", StreamTopics: []string{
		structs.TopicJob + ":" + id, structs.TopicAllocation + ":" + id, structs.TopicEvaluation + ":" + id, structs.TopicDeployment + ":" + id,
	}}, Job: job}
	_, queued := queuedCount(job, evals)
	for _, tg := range job.TaskGroups {
		if tg == nil {
			continue
		}
		g := groupRow{Name: tg.Name, Count: tg.Count, Gang: tg.Gang, Queued: queued[tg.Name]}
		for _, t := range tg.Tasks {
			if t == nil {
				continue
			}
			ts := taskSummary{Name: t.Name, Driver: t.Driver}
			if t.Resources != nil {
				ts.CPU, ts.MemoryMB = t.Resources.CPU, t.Resources.MemoryMB
				var devs []string
				for _, d := range t.Resources.Devices {
					if d != nil {
						devs = append(devs, deviceRequestText(d))
					}
				}
				ts.Devices = strings.Join(devs, ", ")
			}
			g.Tasks = append(g.Tasks, ts)
		}
		for _, a := range allocs {
			if a.TaskGroup == tg.Name {
				g.Allocs.add(a)
			}
		}
		v.Groups = append(v.Groups, g)
	}
	sort.Slice(allocs, func(i, j int) bool { return allocs[i].CreateIndex > allocs[j].CreateIndex })
	restart := u.canRestart()
	for _, a := range allocs {
		v.Allocs = append(v.Allocs, u.allocRow(a, restart))
	}
	sort.Slice(evals, func(i, j int) bool { return evals[i].CreateIndex > evals[j].CreateIndex })
	for _, e := range evals {
		row := evalRow{ID: e.ID, Short: shortID(e.ID), Status: e.Status, TriggeredBy: e.TriggeredBy,
			StatusDescription: e.StatusDescription, Created: fmtNanoTime(e.CreateTime), Blocked: shortID(e.BlockedEval)}
		groups := make([]string, 0, len(e.QueuedAllocations))
		for g := range e.QueuedAllocations {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		for _, g := range groups {
			if n := e.QueuedAllocations[g]; n > 0 {
				row.Queued = append(row.Queued, fmt.Sprintf("%d %s of group %s queued", n, plural(n, "allocation", "allocations"), g))
			}
		}
		groups = groups[:0]
		for g := range e.FailedTGAllocs {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		for _, g := range groups {
			m := e.FailedTGAllocs[g]
			if m == nil {
				continue
			}
			row.Failures = append(row.Failures, evalFailure{Group: g, Evaluated: m.NodesEvaluated, Filtered: m.NodesFiltered,
				Exhausted: m.NodesExhausted, Coalesced: m.CoalescedFailures, Reasons: placementReasons(m)})
		}
		v.Evals = append(v.Evals, row)
	}
	u.jobDeploymentViews(r, v, job, q)
	return "job", v, nil
}

// deviceRequestText says what a task asks of a device in words: "2×
// nvidia/gpu" for whole devices, "4 GiB share of nvidia/gpu" for a share
// of one device's memory (MemoryMB above zero), in MiB below 1 GiB or when
// not a whole number of GiB.
func deviceRequestText(d *structs.RequestedDevice) string {
	if d.MemoryMB > 0 {
		size := fmt.Sprintf("%d MiB", d.MemoryMB)
		if d.MemoryMB%1024 == 0 {
			size = fmt.Sprintf("%d GiB", d.MemoryMB/1024)
		}
		return size + " share of " + d.Name
	}
	return fmt.Sprintf("%d× %s", d.Count, d.Name)
}
