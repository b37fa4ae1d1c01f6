package command

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"golang.org/x/term"
)

// progressLimit bounds how long job run watches tasks start: long enough
// for an image pull, short enough that a queued job does not hang the CLI.
const progressLimit = 5 * time.Minute

// terminal reports whether the command writes to the process's stdout and
// that is a terminal, where job run shows its progress by default and
// redraws the table in place. A character device that is not a terminal,
// such as /dev/null, does not count: term.IsTerminal asks the terminal
// driver (an ioctl such as TCGETS), as isatty(3) does.
func (m *Meta) terminal() bool {
	f, ok := m.Stdout.(*os.File)
	if !ok || f != os.Stdout {
		return false
	}
	return isTerminal(f)
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// progressRow is one task of one allocation in the progress table.
type progressRow struct {
	alloc, group, node, task, state, restarts, gpus string
}

// watchStart follows the allocations evalID placed for jobID until every
// task has started (running) or the allocation is finished, printing a
// table of their tasks. With redraw the table is rewritten in place (a
// terminal); otherwise each change prints as a line. The caller has seen
// evalID complete, so its allocations are already in the state: when it
// placed none (a group of count 0, an unchanged job) or every one of them
// is being stopped, there is nothing to wait for and it returns at once.
// It returns 0, or 1 when an allocation failed or watching was interrupted.
func (m *Meta) watchStart(ctx context.Context, client *api.Client, jobID, evalID string, redraw bool) int {
	ctx, cancel := context.WithTimeout(ctx, progressLimit)
	defer cancel()
	var (
		index     uint64
		lastLines int
		last      = map[string]string{} // alloc/task -> state
		announced bool
	)
	for {
		allocs, meta, err := client.Jobs().Allocations(jobID, &api.QueryOptions{WaitIndex: index, WaitTime: monitorWait, Context: ctx})
		if err != nil {
			if ctx.Err() != nil {
				return m.errorf("Stopped watching: %v", ctx.Err())
			}
			return m.errorf("Error reading allocations: %v", err)
		}
		var mine []*api.Allocation
		for _, a := range allocs {
			if a.EvalID == evalID {
				mine = append(mine, a)
			}
		}
		if len(mine) == 0 {
			m.UI.Info(fmt.Sprintf("==> %s: Evaluation %q has no allocations: no tasks to wait for", m.timestamp(), shortID(evalID)))
			return 0
		}
		sort.Slice(mine, func(i, j int) bool { return mine[i].Name < mine[j].Name })
		rows, done, failed := progressRows(mine)
		if done && !failed && allStopping(mine) {
			m.UI.Info(fmt.Sprintf("==> %s: Every allocation of evaluation %q is being stopped: no tasks to wait for", m.timestamp(), shortID(evalID)))
			return 0
		}
		if !announced {
			m.UI.Info(fmt.Sprintf("==> %s: Waiting for tasks to start (Ctrl-C stops watching; the job keeps running)", m.timestamp()))
			announced = true
		}
		if redraw {
			out := table([]string{"Alloc", "Group", "Node", "Task", "State", "Restarts", "GPUs"}, rowStrings(rows))
			if lastLines > 0 {
				// Move up over the previous table and clear to the end.
				m.UI.Output(fmt.Sprintf("\x1b[%dA\x1b[J", lastLines) + out)
			} else {
				m.UI.Output(out)
			}
			lastLines = strings.Count(out, "\n") + 1
		} else {
			for _, r := range rows {
				key := r.alloc + "/" + r.task
				if last[key] != r.state {
					from := last[key]
					if from == "" {
						from = "new"
					}
					m.UI.Output(fmt.Sprintf("    %s: Allocation %q task %q on node %q: %s -> %s", m.timestamp(), r.alloc, r.task, r.node, from, r.state))
					last[key] = r.state
				}
			}
		}
		if done {
			if failed {
				m.UI.Error(fmt.Sprintf("==> %s: Some tasks failed; see gpulayer alloc status", m.timestamp()))
				return 1
			}
			m.UI.Info(fmt.Sprintf("==> %s: Every task has started (or already finished)", m.timestamp()))
			return 0
		}
		if meta.LastIndex <= index && !m.pause(ctx) {
			return m.errorf("Stopped watching: %v", ctx.Err())
		}
		index = meta.LastIndex
	}
}

// stopping reports whether the server has told a to stop or be evicted: its
// tasks that have not started never will.
func stopping(a *api.Allocation) bool {
	return a.DesiredStatus == api.AllocDesiredStatusStop || a.DesiredStatus == api.AllocDesiredStatusEvict
}

// allStopping reports whether every allocation of allocs is stopping.
func allStopping(allocs []*api.Allocation) bool {
	for _, a := range allocs {
		if !stopping(a) {
			return false
		}
	}
	return true
}

// progressRows lists each task of allocs with its state. done is true when
// every task is running or dead, or belongs to an allocation that is being
// stopped (nothing will start there); failed when one failed.
func progressRows(allocs []*api.Allocation) (rows []progressRow, done, failed bool) {
	done = true
	for _, a := range allocs {
		waits := !stopping(a)
		var gpus []string
		if a.AllocatedResources != nil {
			for _, t := range sortedKeys(a.AllocatedResources.Tasks) {
				gpus = append(gpus, a.AllocatedResources.Tasks[t].DeviceIDs()...)
			}
		}
		node := a.NodeName
		if node == "" {
			node = shortID(a.NodeID)
		}
		tasks := allocTaskNames(a)
		if len(tasks) == 0 {
			tasks = sortedKeys(a.TaskStates)
		}
		if len(tasks) == 0 && !a.ClientTerminalStatus() {
			// Not yet received by its client: nothing to name yet.
			done = done && !waits
			rows = append(rows, progressRow{alloc: shortID(a.ID), group: a.TaskGroup, node: node, task: "<none>", state: a.ClientStatus, restarts: "0", gpus: orNone(strings.Join(gpus, ","))})
		}
		for _, t := range tasks {
			state, restarts := "pending", "0"
			if ts := a.TaskStates[t]; ts != nil {
				state, restarts = ts.State, strconv.FormatUint(ts.Restarts, 10)
				if ts.Failed {
					state += " (failed)"
					failed = true
				}
			}
			if state == "pending" || state == "" {
				done = done && !waits
			}
			rows = append(rows, progressRow{alloc: shortID(a.ID), group: a.TaskGroup, node: node, task: t, state: state, restarts: restarts, gpus: orNone(strings.Join(gpus, ","))})
		}
		if a.ClientStatus == api.AllocClientStatusFailed || a.ClientStatus == api.AllocClientStatusLost {
			failed = true
		}
	}
	return rows, done, failed
}

func rowStrings(rows []progressRow) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = []string{r.alloc, r.group, r.node, r.task, r.state, r.restarts, r.gpus}
	}
	return out
}
