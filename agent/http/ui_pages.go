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

// queuedCount is how many allocations of the job's groups are still
// wanted: the groups' counts less the allocations that are meant to run
// and have not failed or been lost. A stopped job queues nothing.
func queuedCount(job *structs.Job, allocs []*structs.Allocation) (total int, byGroup map[string]int) {
	byGroup = map[string]int{}
	if job.Stop {
		return 0, byGroup
	}
	live := map[string]int{}
	for _, a := range allocs {
		if a.DesiredStatus != structs.AllocDesiredStatusRun {
			continue
		}
		switch a.ClientStatus {
		case structs.AllocClientStatusFailed, structs.AllocClientStatusLost:
			continue
		}
		live[a.TaskGroup]++
	}
	for _, tg := range job.TaskGroups {
		if tg == nil {
			continue
		}
		if q := tg.Count - live[tg.Name]; q > 0 {
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
		row.Queued, _ = queuedCount(j, byJob[j.ID])
		if row.Queued > 0 {
			evals, _, err := u.h.srv.JobEvaluations(r.Context(), j.ID, q)
			if err != nil {
				return "", nil, err
			}
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

// allocRow is an allocation in a list.
type allocRow struct {
	ID, Short, Name, JobID, Group string
	NodeID, NodeName              string
	Desired, Client, Created      string
	GPUs                          []string
	// Restartable is set for a running allocation when the API can
	// restart it, with Restart's method and path.
	Restartable bool
	Restart     restartRoute
}

func (u *ui) allocRow(a *structs.Allocation, restart restartRoute) allocRow {
	row := allocRow{
		ID: a.ID, Short: shortID(a.ID), Name: a.Name, JobID: a.JobID, Group: a.TaskGroup,
		NodeID: a.NodeID, NodeName: a.NodeName, Desired: a.DesiredStatus, Client: a.ClientStatus,
		Created:     fmtNanoTime(a.CreateTime),
		Restartable: restart.Method != "" && a.ClientStatus == structs.AllocClientStatusRunning,
		Restart:     restart,
	}
	if row.NodeName == "" {
		row.NodeName = shortID(a.NodeID)
	}
	if a.AllocatedResources != nil {
		tasks := make([]string, 0, len(a.AllocatedResources.Tasks))
		for t := range a.AllocatedResources.Tasks {
			tasks = append(tasks, t)
		}
		sort.Strings(tasks)
		for _, t := range tasks {
			tr := a.AllocatedResources.Tasks[t]
			if tr == nil {
				continue
			}
			for _, d := range tr.Devices {
				if d == nil {
					continue
				}
				for _, id := range d.DeviceIDs {
					s := id
					if d.MemoryMB > 0 {
						s += fmt.Sprintf(" (%d MiB)", d.MemoryMB)
					}
					row.GPUs = append(row.GPUs, s)
				}
			}
		}
	}
	return row
}

// restartRoute is how this build restarts an allocation: the method and
// the path with "{id}" for the allocation ID, or zero when it cannot.
type restartRoute struct{ Method, Path string }

// canRestart finds the allocation restart route, trying GPUlayer's
// /v1/allocation/{id}/restart and Nomad's /v1/client/allocation/{id}/restart
// with PUT and POST.
func (u *ui) canRestart() restartRoute {
	for _, path := range []string{"/v1/allocation/{id}/restart", "/v1/client/allocation/{id}/restart"} {
		for _, m := range []string{http.MethodPut, http.MethodPost} {
			if u.h.hasRoute(m, strings.Replace(path, "{id}", "x", 1)) {
				return restartRoute{m, path}
			}
		}
	}
	return restartRoute{}
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
		structs.TopicJob + ":" + id, structs.TopicAllocation + ":" + id, structs.TopicEvaluation + ":" + id,
	}}, Job: job}
	_, queued := queuedCount(job, allocs)
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
						devs = append(devs, fmt.Sprintf("%d× %s", d.Count, d.Name))
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
	return "job", v, nil
}
