package http

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// gpuUse is one assigned GPU on the allocation page.
type gpuUse struct {
	Task, ID, Model         string
	ShareMiB                int64
	Simulated, HasTelemetry bool
	Util                    float64
	MemUsedMiB, MemTotalMiB int64
}

type taskEventRow struct {
	Time, Type, Message string
}

type taskStateRow struct {
	Name, Driver, State string
	Failed              bool
	// LogType is the stream the log pane opens on: "stderr" when the
	// task failed and its stderr holds something (the error), else
	// "stdout". LogPrefer is "stderr" when the page could not read the
	// logs itself (the node is another agent's): the script then opens
	// stderr when it is not empty.
	LogType, LogPrefer string
	Restarts           uint64
	CPU, MemoryMB      int
	Started, Finished  string
	// MaxRun is the task's max_run_duration and Deadline when it is
	// stopped for it ("" when none, or not yet known).
	MaxRun, Deadline string
	Events           []taskEventRow
}

type allocView struct {
	pageBase
	Row                                   allocRow
	DesiredDescription, ClientDescription string
	GPUs                                  []gpuUse
	Tasks                                 []taskStateRow
	// RemoteStats is set when the allocation's node is not this agent's
	// client: the page reads its telemetry through /v1/client/stats.
	RemoteStats bool
	// Inputs and Outputs list the tasks' artifact blocks and the files
	// recorded when they ended (ui_artifacts.go); LogArchive is the
	// archived logs' link, "" when none.
	Inputs     []inputRow
	Outputs    []outputRow
	LogArchive *outputRow
	// Released is set when the allocation no longer holds its GPUs (its
	// client reported it finished): their telemetry now belongs to whichever
	// allocation holds them, so the page shows none.
	Released bool
}

// pollMillis is the local client's GPU sampling period in milliseconds
// (5000 without a client), so pages with telemetry re-read as often as it
// changes.
func (u *ui) pollMillis() int {
	if ds, ok := u.h.client.(deviceStatser); ok && u.h.client != nil {
		if st := ds.DeviceStats(); st != nil && st.IntervalSeconds > 0 {
			return int(st.IntervalSeconds * 1000)
		}
	}
	return 5000
}

// localStats returns the local client's telemetry when it is for nodeID.
func (u *ui) localStats(nodeID string) map[string]*structs.DeviceStats {
	ds, ok := u.h.client.(deviceStatser)
	if u.h.client == nil || !ok {
		return nil
	}
	st := ds.DeviceStats()
	if st == nil || st.NodeID != nodeID || st.SampledAt == 0 {
		return nil
	}
	out := make(map[string]*structs.DeviceStats, len(st.Devices))
	for _, d := range st.Devices {
		out[d.ID] = d
	}
	return out
}

func (u *ui) allocPage(r *http.Request) (string, pageData, error) {
	id := r.PathValue("id")
	a, _, err := u.h.srv.AllocGet(r.Context(), id, &structs.QueryOptions{AllowStale: true})
	if err != nil {
		return "", nil, err
	}
	v := &allocView{
		pageBase:           pageBase{Nav: "jobs", StreamTopics: []string{structs.TopicAllocation + ":" + a.ID}, PollMillis: u.pollMillis()},
		Row:                u.allocRow(a, u.canRestart()),
		DesiredDescription: a.DesiredDescription, ClientDescription: a.ClientDescription,
	}
	var tasks []*structs.Task
	var group *structs.TaskGroup
	if a.Job != nil {
		if group = a.Job.LookupTaskGroup(a.TaskGroup); group != nil {
			tasks = group.Tasks
		}
	}
	// Tasks the job no longer lists but the client reported still show.
	known := map[string]bool{}
	for _, t := range tasks {
		if t != nil {
			known[t.Name] = true
		}
	}
	var extra []string
	for name := range a.TaskStates {
		if !known[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		tasks = append(tasks, &structs.Task{Name: name})
	}
	// Telemetry is the device's now: it describes this allocation only
	// while the allocation still holds the device (until its client
	// reports it finished, even when it is being stopped).
	v.Released = !a.HoldsResources()
	var stats map[string]*structs.DeviceStats
	if !v.Released {
		stats = u.localStats(a.NodeID)
		v.RemoteStats = stats == nil
	}
	for _, t := range tasks {
		if t == nil {
			continue
		}
		row := taskStateRow{Name: t.Name, Driver: t.Driver, State: structs.TaskStatePending, LogType: "stdout"}
		if t.Resources != nil {
			row.CPU, row.MemoryMB = t.Resources.CPU, t.Resources.MemoryMB
		}
		if group != nil {
			if d := group.TaskMaxRunDuration(t); d > 0 {
				row.MaxRun = d.String()
			}
		}
		if ts := a.TaskStates[t.Name]; ts != nil {
			row.State, row.Failed, row.Restarts = ts.State, ts.Failed, ts.Restarts
			if row.MaxRun != "" {
				row.Deadline = fmtNanoTimeOpt(ts.Deadline)
			}
			row.Started, row.Finished = fmtNanoTimeOpt(ts.StartedAt), fmtNanoTimeOpt(ts.FinishedAt)
			if ts.Failed {
				switch u.localLogEmpty(r, a, t.Name, "stderr") {
				case logHasOutput:
					row.LogType = "stderr"
				case logUnknown:
					row.LogPrefer = "stderr"
				}
			}
			for i := len(ts.Events) - 1; i >= 0; i-- {
				e := ts.Events[i]
				if e == nil {
					continue
				}
				msg := e.DisplayMessage
				if msg == "" {
					msg = e.Message
				}
				row.Events = append(row.Events, taskEventRow{Time: fmtNanoTime(e.Time), Type: e.Type, Message: msg})
			}
		}
		v.Tasks = append(v.Tasks, row)
		if a.AllocatedResources == nil || a.AllocatedResources.Tasks[t.Name] == nil {
			continue
		}
		for _, d := range a.AllocatedResources.Tasks[t.Name].Devices {
			if d == nil {
				continue
			}
			for _, gid := range d.DeviceIDs {
				g := gpuUse{Task: t.Name, ID: gid, Model: d.Name, ShareMiB: d.MemoryMB}
				if s := stats[gid]; s != nil {
					g.HasTelemetry, g.Simulated = true, s.Simulated
					g.Util, g.MemUsedMiB, g.MemTotalMiB = s.UtilizationPercent, s.MemoryUsedMiB, s.MemoryTotalMiB
				}
				v.GPUs = append(v.GPUs, g)
			}
		}
	}
	v.Inputs, v.Outputs, v.LogArchive = allocArtifactRows(a, tasks)
	return "alloc", v, nil
}

func fmtNanoTimeOpt(ns int64) string {
	if ns == 0 {
		return ""
	}
	return fmtNanoTime(ns)
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

// logState is what the page knows of a task's log stream.
type logState int

const (
	// logUnknown: the log is on another agent's node (or unreadable);
	// the page's script finds out.
	logUnknown logState = iota
	// logEmpty: the stream holds nothing.
	logEmpty
	// logHasOutput: the stream holds at least one byte.
	logHasOutput
)

// localLogEmpty reads at most one byte of a task's logType stream from
// this agent's client, when the allocation runs on it.
func (u *ui) localLogEmpty(r *http.Request, a *structs.Allocation, task, logType string) logState {
	if u.h.client == nil {
		return logUnknown
	}
	if n := u.h.client.Node(); n == nil || n.ID != a.NodeID {
		return logUnknown
	}
	rc, err := u.h.client.AllocLogs(r.Context(), a.ID, task, logType, false)
	if err != nil {
		if errors.Is(err, structs.ErrNotFound) {
			return logEmpty
		}
		return logUnknown
	}
	defer rc.Close()
	var b [1]byte
	if n, _ := io.ReadFull(rc, b[:]); n > 0 {
		return logHasOutput
	}
	return logEmpty
}
