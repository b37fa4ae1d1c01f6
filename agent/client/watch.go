package client

import (
	"context"
	"errors"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// allocWatchWait is the blocking query wait of the alloc watch.
const allocWatchWait = 30 * time.Second

// watchAllocs runs a blocking query on the node's allocations and applies
// each new result until the client shuts down.
func (c *Client) watchAllocs() {
	var index uint64
	backoff := 250 * time.Millisecond
	for {
		if c.ctx.Err() != nil {
			return
		}
		allocs, meta, err := c.cfg.Servers.NodeAllocations(c.ctx, c.nodeID(), &structs.QueryOptions{MinQueryIndex: index, MaxQueryTime: allocWatchWait})
		if err != nil {
			if c.ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return
			}
			c.logger.Warn("watch allocations failed; retrying", "error", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 250 * time.Millisecond
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

// applyAllocs diffs the server's allocations for this node against the
// runners: new runnable allocations start, allocations told to stop stop,
// and allocations no longer listed are stopped and forgotten. An
// allocation already finished, by the servers' record or this client's
// state file, never runs again.
func (c *Client) applyAllocs(allocs []*structs.Allocation) {
	seen := make(map[string]bool, len(allocs))
	var start []*allocRunner
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
			ar.update(a)
		case rec != nil:
			// Finished in an earlier life; make sure the servers know.
			if !a.ClientTerminalStatus() {
				c.sync.enqueue(&structs.Allocation{ID: a.ID, NodeID: a.NodeID, ClientStatus: rec.ClientStatus, ClientDescription: rec.ClientDescription, TaskStates: rec.TaskStates})
			}
		case a.ClientTerminalStatus():
			// Finished (or lost); never run again.
		case a.DesiredStatus != structs.AllocDesiredStatusRun:
			// Told to stop before it ever ran here: it holds resources
			// until reported finished, so report it complete.
			c.sync.enqueue(&structs.Allocation{ID: a.ID, NodeID: a.NodeID, ClientStatus: structs.AllocClientStatusComplete, ClientDescription: "stopped before it started on this client", TaskStates: a.TaskStates})
		default:
			ar := newAllocRunner(c, a.Copy())
			c.mu.Lock()
			if c.ctx.Err() != nil {
				c.mu.Unlock()
				return
			}
			c.runners[a.ID] = ar
			c.mu.Unlock()
			start = append(start, ar)
		}
	}
	for _, ar := range start {
		ar.logger.Info("starting allocation", "job", ar.jobName(), "group", ar.alloc.TaskGroup)
		go ar.run()
	}

	// Allocations the servers dropped: stop, then forget.
	c.mu.Lock()
	var gone []*allocRunner
	for id, ar := range c.runners {
		if !seen[id] {
			gone = append(gone, ar)
		}
	}
	for id := range c.finished {
		if !seen[id] {
			delete(c.finished, id)
			if err := c.state.deleteAlloc(id); err != nil {
				c.logger.Warn("forget finished allocation", "alloc_id", id, "error", err)
			}
		}
	}
	c.mu.Unlock()
	for _, ar := range gone {
		ar.logger.Info("allocation no longer on this node; stopping")
		ar.stop()
		go func() {
			<-ar.done
			c.mu.Lock()
			if c.runners[ar.alloc.ID] == ar {
				delete(c.runners, ar.alloc.ID)
			}
			c.mu.Unlock()
		}()
	}
}
