package client

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/structs"
)

// TaskEventGPUUnhealthy is the task event recorded on every task of a
// running allocation when one of its GPUs becomes unhealthy. The
// allocation keeps running, as in Nomad and Kubernetes: the fault may not
// have touched it, and the job or an operator decides whether to stop it.
const TaskEventGPUUnhealthy = "GPU Unhealthy"

// healthSource returns the source that watches the node's GPUs and the
// instance IDs it watches, or nil when there is nothing to watch: the
// test hook Config.health watches every instance; otherwise NVML watches
// the real NVIDIA GPUs (not simulated ones, not those unreadable at
// detection). A build or host without NVML has no real NVIDIA GPU, so no
// monitor starts there.
func (c *Client) healthSource(node *structs.Node) (devices.HealthSource, []string) {
	if node.NodeResources == nil {
		return nil, nil
	}
	var all, nvidia []string
	for _, g := range node.NodeResources.Devices {
		if g == nil {
			continue
		}
		simulated := g.Attributes["simulated"] != nil && g.Attributes["simulated"].Bool != nil && *g.Attributes["simulated"].Bool
		for _, in := range g.Instances {
			if in == nil {
				continue
			}
			all = append(all, in.ID)
			if g.Vendor == structs.DeviceVendorNvidia && !simulated && g.Name != devices.UnreadableName {
				nvidia = append(nvidia, in.ID)
			}
		}
	}
	if c.cfg.health != nil {
		return c.cfg.health, all
	}
	// Tests that replace NVML detection get no NVML health either.
	if c.cfg.detectGPUs != nil || len(nvidia) == 0 {
		return nil, nil
	}
	src, err := devices.NewNVMLHealth(devices.NVMLHealthConfig{Interval: c.cfg.DeviceHealthInterval, Logger: c.logger.Named("gpu_health")})
	if err != nil {
		c.logger.Info("GPU health monitor unavailable", "error", err)
		return nil, nil
	}
	return src, nvidia
}

// startHealth starts the health source and the loop that registers the
// node again after a change, both stopped by Shutdown.
func (c *Client) startHealth() {
	src, ids := c.healthSource(c.Node())
	if src == nil {
		return
	}
	c.wg.Add(2)
	go func() { defer c.wg.Done(); src.Run(c.ctx, ids, c.deviceHealthChanged) }()
	go func() { defer c.wg.Done(); c.healthRegisterLoop() }()
}

// deviceHealthChanged applies a health change to the node's device
// instance and asks healthRegisterLoop to send the node to the servers.
// When a GPU goes unhealthy, each running allocation holding it gets a
// warning log line and a TaskEventGPUUnhealthy event, and keeps running.
func (c *Client) deviceHealthChanged(h devices.DeviceHealth) {
	c.mu.Lock()
	// Copy, change, swap: readers such as the telemetry loop hold the old
	// node without the lock.
	n := c.node.Copy()
	in := findInstance(n, h.ID)
	if in == nil || (in.Healthy == h.Healthy && in.HealthDescription == h.Description) {
		c.mu.Unlock()
		return
	}
	in.Healthy, in.HealthDescription = h.Healthy, h.Description
	c.node = n
	var holders []*allocRunner
	if !h.Healthy {
		for _, ar := range c.runners {
			if !ar.terminal() && holdsDevice(ar.alloc, h.ID) {
				holders = append(holders, ar)
			}
		}
	}
	c.mu.Unlock()

	if h.Healthy {
		c.logger.Info("GPU healthy again; it takes new allocations", "device", h.ID)
	} else {
		c.logger.Warn("GPU unhealthy; it takes no new allocations", "device", h.ID, "reason", h.Description)
	}
	for _, ar := range holders {
		c.logger.Warn("allocation keeps running on an unhealthy GPU", "alloc_id", ar.alloc.ID, "device", h.ID, "reason", h.Description)
		ar.noteUnhealthyGPU(h.ID, h.Description)
	}
	select {
	case c.healthDirty <- struct{}{}:
	default: // a registration is already due; it will carry this change
	}
}

// healthRegisterLoop registers the node again (retrying with backoff)
// each time deviceHealthChanged asks, until the client stops. Changes that
// arrive during a registration are sent by the next one.
func (c *Client) healthRegisterLoop() {
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.healthDirty:
		}
		if err := c.registerWithRetry(c.ctx); err != nil {
			return // only when the client stops
		}
	}
}

// findInstance returns the node's device instance id, or nil.
func findInstance(n *structs.Node, id string) *structs.DeviceInstance {
	if n.NodeResources == nil {
		return nil
	}
	for _, g := range n.NodeResources.Devices {
		if g == nil {
			continue
		}
		for _, in := range g.Instances {
			if in != nil && in.ID == id {
				return in
			}
		}
	}
	return nil
}

// holdsDevice reports whether the allocation was given device instance id.
func holdsDevice(a *structs.Allocation, id string) bool {
	return a != nil && slices.Contains(a.DeviceIDs(), id)
}

// noteUnhealthyGPU records a TaskEventGPUUnhealthy event on every task of
// the allocation's group; the tasks keep running.
func (ar *allocRunner) noteUnhealthyGPU(id, description string) {
	var names []string
	if ar.alloc.Job != nil {
		if tg := ar.alloc.Job.LookupTaskGroup(ar.alloc.TaskGroup); tg != nil {
			for _, t := range tg.Tasks {
				names = append(names, t.Name)
			}
		}
	}
	msg := fmt.Sprintf("GPU %s is %s; the allocation keeps running", id, description)
	now := time.Now().UnixNano()
	for _, n := range names {
		ar.updateTask(n, &structs.TaskEvent{Type: TaskEventGPUUnhealthy, Time: now, Message: msg, DisplayMessage: msg}, nil)
	}
}
