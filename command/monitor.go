package command

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// Exit codes of a monitored evaluation, as in Nomad: 0 when every
// allocation was placed, 2 when some could not be (blocked, failed).
const (
	exitPlaced       = 0
	exitPlacementErr = 2
)

// monitorWait bounds each blocking query of the monitor.
const monitorWait = 30 * time.Second

// monitor follows the evaluation until it is terminal, printing Nomad's
// monitor lines: triggered by, allocations created, status changes and, for
// groups that did not fit, the reasons. It follows NextEval when the
// evaluation hands over to another.
func (m *Meta) monitor(ctx context.Context, client *api.Client, evalID string) int {
	m.UI.Info(fmt.Sprintf("==> %s: Monitoring evaluation %q", m.timestamp(), shortID(evalID)))
	var (
		index     uint64
		status    string
		triggered bool
		seen      = map[string]bool{}
		// awaiting is set while following a blocked evaluation whose
		// allocations only wait for allocations being stopped (see
		// awaitingStops); seenIndex is its ModifyIndex when first read,
		// so a re-evaluation is noticed.
		awaiting  bool
		seenIndex uint64
	)
	for {
		if err := ctx.Err(); err != nil {
			return m.errorf("Monitoring interrupted: %v", err)
		}
		eval, meta, err := client.Evaluations().Info(evalID, &api.QueryOptions{WaitIndex: index, WaitTime: monitorWait, Context: ctx})
		if err != nil {
			if api.IsNotFound(err) && index == 0 {
				// The evaluation may not be readable yet on this server.
				if !m.pause(ctx) {
					return m.errorf("Monitoring interrupted: %v", ctx.Err())
				}
				continue
			}
			return m.errorf("Error reading evaluation: %v", err)
		}
		if !triggered {
			m.UI.Output(fmt.Sprintf("    %s: Evaluation triggered by job %q", m.timestamp(), eval.JobID))
			triggered = true
		}
		if err := m.printNewAllocs(client, eval, seen); err != nil {
			return m.errorf("Error reading allocations: %v", err)
		}
		if status != "" && eval.Status != status {
			m.UI.Output(fmt.Sprintf("    %s: Evaluation status changed: %q -> %q", m.timestamp(), status, eval.Status))
		}
		if status == "" && eval.TerminalStatus() {
			m.UI.Output(fmt.Sprintf("    %s: Evaluation status changed: %q -> %q", m.timestamp(), api.EvalStatusPending, eval.Status))
		}
		status = eval.Status
		if awaiting && seenIndex == 0 {
			seenIndex = eval.ModifyIndex
		}
		reevaluated := awaiting && eval.Status == api.EvalStatusBlocked && eval.ModifyIndex > seenIndex
		if eval.TerminalStatus() || reevaluated {
			if eval.NextEval != "" {
				m.UI.Info(fmt.Sprintf("==> %s: Monitoring next evaluation %q", m.timestamp(), shortID(eval.NextEval)))
				evalID, index, status, triggered = eval.NextEval, 0, "", false
				continue
			}
			if next, ok := m.awaitingStops(eval); ok {
				// Nothing lacks capacity: the allocations wait for
				// others to stop. Follow the blocked evaluation that
				// places them rather than report a failure.
				if next != evalID {
					m.UI.Info(fmt.Sprintf("==> %s: Monitoring blocked evaluation %q", m.timestamp(), shortID(next)))
					evalID, index, status, triggered = next, 0, "", true
				}
				awaiting, seenIndex = true, eval.ModifyIndex
				continue
			}
			return m.finish(eval)
		}
		if meta.LastIndex <= index {
			// The server answered without blocking; do not spin.
			if !m.pause(ctx) {
				return m.errorf("Monitoring interrupted: %v", ctx.Err())
			}
		}
		index = meta.LastIndex
	}
}

// pause waits PollInterval; it reports false when ctx ended first.
func (m *Meta) pause(ctx context.Context) bool {
	t := time.NewTimer(m.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// printNewAllocs prints "Allocation ... created" once per allocation of the
// evaluation.
func (m *Meta) printNewAllocs(client *api.Client, eval *api.Evaluation, seen map[string]bool) error {
	if eval.JobID == "" {
		return nil
	}
	allocs, _, err := client.Jobs().Allocations(eval.JobID, nil)
	if err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return err
	}
	sort.Slice(allocs, func(i, j int) bool { return allocs[i].Name < allocs[j].Name })
	for _, a := range allocs {
		if a.EvalID != eval.ID || seen[a.ID] {
			continue
		}
		seen[a.ID] = true
		m.UI.Output(fmt.Sprintf("    %s: Allocation %q created: node %q, group %q", m.timestamp(), shortID(a.ID), shortID(a.NodeID), a.TaskGroup))
	}
	return nil
}

// awaitingStops reports whether every group the evaluation could not place
// waits only for allocations being stopped or evicted to release their
// resources (AllocMetric.AwaitingStops covers all its unplaced
// allocations), as after a destructive update on a node with no spare GPU.
// It prints one line per group and returns the blocked evaluation that
// places them (the evaluation itself when it is that blocked evaluation).
func (m *Meta) awaitingStops(eval *api.Evaluation) (string, bool) {
	next := eval.BlockedEval
	if eval.Status == api.EvalStatusBlocked {
		next = eval.ID
	}
	if len(eval.FailedTGAllocs) == 0 || next == "" {
		return "", false
	}
	for _, metric := range eval.FailedTGAllocs {
		if metric == nil || metric.AwaitingStops < 1+metric.CoalescedFailures {
			return "", false
		}
	}
	for _, tg := range sortedKeys(eval.FailedTGAllocs) {
		n := 1 + eval.FailedTGAllocs[tg].CoalescedFailures
		noun := "allocation waits"
		if n > 1 {
			noun = "allocations wait"
		}
		m.UI.Output(fmt.Sprintf("    %s: Task Group %q: %d %s for allocations being stopped to release their resources", m.timestamp(), tg, n, noun))
	}
	return next, true
}

// finish prints the final lines of a terminal evaluation and returns the
// exit code.
func (m *Meta) finish(eval *api.Evaluation) int {
	if len(eval.FailedTGAllocs) == 0 {
		m.UI.Info(fmt.Sprintf("==> %s: Evaluation %q finished with status %q", m.timestamp(), shortID(eval.ID), eval.Status))
		if eval.Status != api.EvalStatusComplete {
			if eval.StatusDescription != "" {
				m.UI.Output("    " + eval.StatusDescription)
			}
			return exitPlacementErr
		}
		return exitPlaced
	}
	m.UI.Info(fmt.Sprintf("==> %s: Evaluation %q finished with status %q but failed to place all allocations:", m.timestamp(), shortID(eval.ID), eval.Status))
	for _, tg := range sortedKeys(eval.FailedTGAllocs) {
		metric := eval.FailedTGAllocs[tg]
		n := 1 + metric.CoalescedFailures
		noun := "allocation"
		if n > 1 {
			noun += "s"
		}
		m.UI.Output(fmt.Sprintf("    %s: Task Group %q (failed to place %d %s):", m.timestamp(), tg, n, noun))
		m.UI.Output(formatAllocMetric(metric, "      "))
	}
	if eval.BlockedEval != "" {
		m.UI.Output(fmt.Sprintf("    %s: Evaluation %q waiting for additional capacity to place remainder", m.timestamp(), shortID(eval.BlockedEval)))
	}
	return exitPlacementErr
}

// formatAllocMetric lists why nodes were filtered or exhausted, one
// "* reason" line each, as Nomad's formatAllocMetrics does.
func formatAllocMetric(metric *api.AllocMetric, prefix string) string {
	var lines []string
	if metric.NodesEvaluated == 0 {
		lines = append(lines, prefix+"* No nodes were eligible for evaluation")
	}
	for _, cs := range sortedKeys(metric.ConstraintFiltered) {
		lines = append(lines, fmt.Sprintf("%s* Constraint %q: %d nodes excluded by filter", prefix, cs, metric.ConstraintFiltered[cs]))
	}
	if metric.NodesExhausted > 0 {
		lines = append(lines, fmt.Sprintf("%s* Resources exhausted on %d nodes", prefix, metric.NodesExhausted))
	}
	for _, dim := range sortedKeys(metric.DimensionExhausted) {
		lines = append(lines, fmt.Sprintf("%s* Dimension %q exhausted on %d nodes", prefix, dim, metric.DimensionExhausted[dim]))
	}
	return strings.Join(lines, "\n")
}
