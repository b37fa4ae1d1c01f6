package client

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// AllocWatchWait is the blocking query wait of the alloc watch: 5
// minutes, Nomad's client's, so an idle fleet's polls cost the servers
// little (10,000 nodes at 30 s were 333 requests a second). The server
// adds up to 1/16 of jitter (server's blockingQuery), so a fleet started
// at once does not ask again at once. The wait does not delay failover:
// a poll to a server that dies ends with its connection, one to a server
// that fails another call of this client is cut (HTTPServerConn), and a
// server ends its polls at each leader change, answering KnownLeader
// false when it knows none, after which the client asks another server.
// The heartbeat is separate (its TTL).
const AllocWatchWait = 5 * time.Minute

// watchRetry is the first wait before the alloc watch asks again after a
// failed query (every server down, or none leading during an election);
// it doubles up to maxSyncRetry, so a client sees the allocations of a
// new leader within a fraction of a second of its election.
const watchRetry = 50 * time.Millisecond

// watchAllocs runs a blocking query on the node's allocations and applies
// each new result until the client shuts down. With a server connection
// that serves the change routes (AllocChangesConn) it reads only what
// changed (watchAllocChanges); a server that answers those routes 404 (an
// older version) is watched the old way.
func (c *Client) watchAllocs() {
	if cc, ok := c.cfg.Servers.(AllocChangesConn); ok && !c.watchAllocChanges(cc) {
		return
	}
	var index uint64
	backoff := watchRetry
	for {
		if c.ctx.Err() != nil {
			return
		}
		allocs, meta, err := c.cfg.Servers.NodeAllocations(c.ctx, c.nodeID(), &structs.QueryOptions{MinQueryIndex: index, MaxQueryTime: AllocWatchWait})
		if err != nil {
			if c.ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return
			}
			wait := jittered(backoff)
			c.logger.Warn("watch allocations failed; retrying", "error", err, "retry_in", wait)
			t := time.NewTimer(wait)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, maxSyncRetry)
			continue
		}
		backoff = watchRetry
		if meta.Index < index {
			// The servers' index went back (a restored cluster): start over.
			c.logger.Warn("allocation index went backwards; resetting", "from", index, "to", meta.Index)
			index = 0
		} else {
			index = meta.Index
		}
		c.applyAllocs(allocs)
	}
}

// watchAllocChanges follows the node's allocations with an AllocTracker
// and applies every allocation on the node after each change, until the
// client shuts down (it returns false). It returns true when the server
// does not serve the change routes: the caller falls back to the full
// allocation watch.
func (c *Client) watchAllocChanges(cc AllocChangesConn) bool {
	var tr *AllocTracker
	backoff := 250 * time.Millisecond
	for {
		if c.ctx.Err() != nil {
			return false
		}
		if id := c.nodeID(); tr == nil || tr.nodeID != id {
			tr = NewAllocTracker(cc, id)
		}
		all, _, err := tr.Next(c.ctx, AllocWatchWait)
		if err != nil {
			if c.ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return false
			}
			if errors.Is(err, structs.ErrNotFound) && strings.Contains(err.Error(), "no route for") {
				c.logger.Warn("servers do not serve the allocation change routes; watching every allocation", "error", err)
				return true
			}
			c.logger.Warn("watch allocation changes failed; retrying", "error", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 250 * time.Millisecond
		c.applyAllocs(all)
		// A final status resent for an allocation finished in an earlier
		// life (applyAllocs) reaches the servers through the sync queue;
		// the tracker does not fetch the client's own reports, so it must
		// not resend it at every wake-up.
		c.mu.Lock()
		for _, a := range all {
			if rec := c.finished[a.ID]; rec != nil && !a.ClientTerminalStatus() {
				tr.assumeClientStatus(a.ID, rec.ClientStatus)
			}
		}
		c.mu.Unlock()
	}
}

// applyAllocs diffs the server's allocations for this node against the
// runners: new runnable allocations start, allocations told to stop stop,
// and allocations no longer listed are stopped and forgotten (those that
// had finished here lose their directory as well, see collectAlloc). An
// allocation already finished, by the servers' record or this client's
// state file, never runs again.
func (c *Client) applyAllocs(allocs []*structs.Allocation) {
	seen := make(map[string]bool, len(allocs))
	var start []*allocRunner
	// defs are the allocations recorded for restoreAllocs: those of new
	// runners, and of runners told to stop (so a restart does not run
	// them again before a server answers).
	var defs []*structs.Allocation
	for _, a := range allocs {
		if a == nil {
			continue
		}
		seen[a.ID] = true
		c.mu.Lock()
		ar := c.runners[a.ID]
		rec := c.finished[a.ID]
		c.mu.Unlock()
		switch {
		case ar != nil:
			if a.DesiredStatus != structs.AllocDesiredStatusRun && ar.markStopRecorded() {
				defs = append(defs, a)
			}
			ar.update(a)
		case rec != nil:
			// Finished in an earlier life; make sure the servers know.
			if !a.ClientTerminalStatus() {
				c.sync.enqueue(&structs.Allocation{ID: a.ID, NodeID: a.NodeID, ClientStatus: rec.ClientStatus, ClientDescription: rec.ClientDescription, TaskStates: rec.TaskStates})
			}
		case a.ClientTerminalStatus():
			// Finished (or lost); never run again. Tasks an earlier life
			// of this client left running for it are stopped.
			if h := c.takeRecovered(a.ID); len(h) > 0 {
				go c.stopOrphans(a.ID, h)
			}
		case a.DesiredStatus != structs.AllocDesiredStatusRun && c.hasRecovered(a.ID):
			// Told to stop while this client was down, its tasks still
			// running: reattach to them only to stop them.
			c.mu.Lock()
			ar := c.adoptRunnerLocked(a.Copy(), true)
			c.mu.Unlock()
			start = append(start, ar)
		case a.DesiredStatus != structs.AllocDesiredStatusRun:
			// Told to stop before it ever ran here: it holds resources
			// until reported finished, so report it complete.
			c.sync.enqueue(&structs.Allocation{ID: a.ID, NodeID: a.NodeID, ClientStatus: structs.AllocClientStatusComplete, ClientDescription: "stopped before it started on this client", TaskStates: a.TaskStates})
		default:
			c.mu.Lock()
			if c.ctx.Err() != nil {
				c.mu.Unlock()
				return
			}
			ar := c.adoptRunnerLocked(a.Copy(), false)
			c.mu.Unlock()
			start = append(start, ar)
		}
	}
	for _, ar := range start {
		defs = append(defs, ar.alloc)
	}
	if err := c.state.putAllocDefs(defs); err != nil {
		// Only a restart without servers suffers: it cannot restore
		// these until a server answers.
		c.logger.Warn("record allocations for restore", "error", err)
	}
	for _, ar := range start {
		ar.logger.Info("starting allocation", "job", ar.jobName(), "group", ar.alloc.TaskGroup)
		go ar.run()
	}
	if c.endpoints != nil {
		c.endpoints.wake()
	}
	// Starts no runner took belong to allocations that will not run here
	// again.
	c.pruneAllocStarts()

	// Allocations the servers dropped: stop, then forget. Those that
	// finished here were garbage-collected by the servers: their record
	// and directory go too (collectAlloc); a dropped allocation that was
	// still running keeps its directory.
	c.mu.Lock()
	var gone []*allocRunner
	for id, ar := range c.runners {
		if !seen[id] {
			gone = append(gone, ar)
		}
	}
	var collect []string
	for id := range c.finished {
		if !seen[id] {
			delete(c.finished, id)
			if len(c.recovered[id]) > 0 {
				// Tasks of it still run (stopped below): keep the
				// directory, forget the record.
				if err := c.state.deleteAlloc(id); err != nil {
					c.logger.Warn("forget finished allocation", "alloc_id", id, "error", err)
				}
				continue
			}
			collect = append(collect, id)
		}
	}
	for id := range c.recovered {
		if !seen[id] {
			// Not on this node any more: stop what still runs of it.
			go c.stopOrphans(id, c.recovered[id])
			delete(c.recovered, id)
		}
	}
	c.mu.Unlock()
	for _, id := range collect {
		if done := c.archivingDone(id); done != nil {
			// Its log archive is still being uploaded from the
			// directory: collect once that is done.
			go func() { <-done; c.collectAlloc(id) }()
			continue
		}
		c.collectAlloc(id)
	}
	for _, ar := range gone {
		finished := ar.finishedLocally()
		if !finished {
			ar.logger.Info("allocation no longer on this node; stopping")
			ar.stop()
		}
		go func() {
			<-ar.done
			c.mu.Lock()
			if c.runners[ar.alloc.ID] == ar {
				delete(c.runners, ar.alloc.ID)
			}
			c.mu.Unlock()
			if finished {
				c.collectAlloc(ar.alloc.ID)
			} else if err := c.state.deleteAllocDef(ar.alloc.ID); err != nil {
				ar.logger.Warn("forget allocation", "error", err)
			}
		}()
	}
}

// hasRecovered reports whether an earlier life of this client recorded
// task handles for the allocation.
func (c *Client) hasRecovered(allocID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recovered[allocID]) > 0
}

// adoptRunnerLocked makes and registers the runner of a, handing it the
// task handles and start time an earlier life of this client recorded for
// it (then forgotten here); stop marks a stop the servers already asked
// for. Call with c.mu held.
func (c *Client) adoptRunnerLocked(a *structs.Allocation, stop bool) *allocRunner {
	ar := newAllocRunner(c, a)
	ar.recovered = c.recovered[a.ID]
	delete(c.recovered, a.ID)
	if st, ok := c.starts[a.ID]; ok {
		ar.priorStart = st
		delete(c.starts, a.ID)
	}
	ar.stopRequested = stop
	c.runners[a.ID] = ar
	return ar
}

// takeRecovered returns and forgets the recorded task handles of an
// allocation.
func (c *Client) takeRecovered(allocID string) map[string]*driver.TaskHandle {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.recovered[allocID]
	delete(c.recovered, allocID)
	return h
}

// stopOrphans stops tasks an earlier life of this client started for an
// allocation that must not run here any more, then forgets their handles.
func (c *Client) stopOrphans(allocID string, handles map[string]*driver.TaskHandle) {
	for task, h := range handles {
		drv := c.driver(h.Driver)
		if drv == nil {
			continue
		}
		cfg := &driver.TaskConfig{ID: h.ID, AllocID: allocID, Name: task,
			TaskDir: filepath.Join(c.cfg.DataDir, "allocs", allocID, task),
			LogDir:  filepath.Join(c.cfg.DataDir, "allocs", allocID, task, "logs")}
		if err := drv.RecoverTask(h, cfg); err != nil {
			continue
		}
		c.logger.Info("stopping a task of an allocation no longer run here", "alloc_id", allocID, "task", task)
		if err := drv.StopTask(h.ID, driver.DefaultKillTimeout, ""); err != nil {
			c.logger.Warn("stop orphaned task", "alloc_id", allocID, "task", task, "error", err)
		}
		_ = drv.DestroyTask(h.ID)
	}
	if err := c.state.deleteHandles(allocID); err != nil {
		c.logger.Warn("forget task handles", "alloc_id", allocID, "error", err)
	}
	if err := c.state.deleteAllocDef(allocID); err != nil {
		c.logger.Warn("forget allocation", "alloc_id", allocID, "error", err)
	}
}
