package client

import (
	"github.com/gpulayer/gpulayer/structs"
)

// restoreAllocs rebuilds the runners of the allocations an earlier life
// of this client recorded (state_allocdefs.go), before and regardless of
// registration, as Nomad's client restores from its local state: tasks
// still running are reattached by their recorded handles, those that
// died meanwhile start again under their restart policy, checks run, and
// the endpoint manager hands the members to their routers again. An
// allocation finished here never runs again; one the servers had told to
// stop is only reattached to be stopped. The servers' view is applied
// once one answers (applyAllocs: those they stopped stop, those they no
// longer list are stopped and forgotten), and the runners' statuses wait
// in the sync queue until then. It returns how many runners it started.
func (c *Client) restoreAllocs(defs []*structs.Allocation) int {
	var start []*allocRunner
	c.mu.Lock()
	for _, a := range defs {
		if a == nil || c.runners[a.ID] != nil || c.finished[a.ID] != nil || a.ClientTerminalStatus() {
			continue
		}
		stop := a.DesiredStatus != structs.AllocDesiredStatusRun
		if stop && len(c.recovered[a.ID]) == 0 {
			// Told to stop and nothing of it runs: nothing to restore.
			continue
		}
		ar := c.adoptRunnerLocked(a, stop)
		ar.stopRecorded = stop
		start = append(start, ar)
	}
	c.mu.Unlock()
	for _, ar := range start {
		n := len(ar.recovered)
		ar.logger.Info("restoring allocation from local state", "job", ar.jobName(), "group", ar.alloc.TaskGroup,
			"tasks_to_reattach", n, "stopping", ar.stopRequested)
		go ar.run()
	}
	if len(start) > 0 && c.endpoints != nil {
		c.endpoints.wake()
	}
	return len(start)
}
