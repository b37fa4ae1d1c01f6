package client

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/structs"
)

// DefaultTelemetryInterval is how often a client samples its GPUs when
// Config.TelemetryInterval is zero: every 5 seconds.
const DefaultTelemetryInterval = 5 * time.Second

// TaskEventIdleGPU is the task event recorded when the idle policy stops
// an allocation.
const TaskEventIdleGPU = "GPU Idle"

// telemetry is the client's latest GPU sample and the idle policy's
// bookkeeping. Its fields are guarded by Client.mu.
type telemetry struct {
	latest *structs.NodeDeviceStats
	// idleSince maps an allocation to when all its GPUs first went below
	// its policy's threshold in the current idle stretch.
	idleSince map[string]time.Time
	// nvmlErr is the last NVML failure, logged once per change.
	nvmlErr string
}

// DeviceStats returns the latest GPU telemetry of this client's node: one
// entry per device instance, with the allocation holding it. Before the
// first sample it returns the node's devices with zero figures.
func (c *Client) DeviceStats() *structs.NodeDeviceStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tel.latest == nil {
		return &structs.NodeDeviceStats{NodeID: c.node.ID, IntervalSeconds: c.cfg.TelemetryInterval.Seconds()}
	}
	return c.tel.latest.Copy()
}

// heartbeat sends one heartbeat (status ready), carrying the latest GPU
// samples when the servers take them: at most one report per heartbeat,
// at most structs.MaxHeartbeatGPUs samples, none older than three
// telemetry intervals.
func (c *Client) heartbeat() (time.Duration, error) {
	id := c.nodeID()
	if gh, ok := c.cfg.Servers.(GPUHeartbeater); ok {
		if gpus := c.gpuReport(time.Now()); len(gpus) > 0 {
			return gh.NodeHeartbeatGPUs(c.ctx, id, structs.NodeStatusReady, gpus)
		}
	}
	return c.cfg.Servers.NodeUpdateStatus(c.ctx, id, structs.NodeStatusReady)
}

// gpuReport turns the latest telemetry sample into the heartbeat's GPU
// samples: nil before the first sample or when it is stale.
func (c *Client) gpuReport(now time.Time) []*structs.GPUUsage {
	c.mu.Lock()
	st := c.tel.latest
	c.mu.Unlock()
	return gpuUsageOf(st, now, 3*c.cfg.TelemetryInterval)
}

// gpuUsageOf returns the GPU samples of st, nil when st is older than
// maxAge at now.
func gpuUsageOf(st *structs.NodeDeviceStats, now time.Time, maxAge time.Duration) []*structs.GPUUsage {
	if st == nil || st.SampledAt == 0 || now.Sub(time.Unix(0, st.SampledAt)) > maxAge {
		return nil
	}
	var out []*structs.GPUUsage
	for _, d := range st.Devices {
		if d == nil || d.Type != structs.DeviceTypeGPU || d.ID == "" || len(d.ID) > structs.MaxGPUUsageIDLen {
			continue
		}
		if len(out) == structs.MaxHeartbeatGPUs {
			break
		}
		u := &structs.GPUUsage{ID: d.ID, UtilizationPercent: min(max(d.UtilizationPercent, 0), 100),
			MemoryUsedMiB: min(max(d.MemoryUsedMiB, 0), structs.MaxGPUMemoryMiB), Failed: d.Error != ""}
		if u.UtilizationPercent != u.UtilizationPercent { // NaN from a broken reading
			u.UtilizationPercent, u.Failed = 0, true
		}
		out = append(out, u)
	}
	return out
}

// telemetryLoop samples the GPUs every Config.TelemetryInterval, applies
// the idle policy, and stops when the client does.
func (c *Client) telemetryLoop() {
	t := time.NewTicker(c.cfg.TelemetryInterval)
	defer t.Stop()
	for {
		c.sampleDevices(time.Now())
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// holder is an allocation runner holding device instances.
type holder struct {
	ar      *allocRunner
	devices []string
}

// sampleDevices takes one sample at now, stores it, and stops allocations
// whose idle policy has run out.
func (c *Client) sampleDevices(now time.Time) {
	c.mu.Lock()
	node := c.node
	held := map[string]*holder{} // device ID -> holder
	var holders []*holder
	for _, ar := range c.runners {
		if ar.terminal() {
			continue
		}
		h := &holder{ar: ar}
		for _, id := range ar.alloc.DeviceIDs() {
			held[id] = h
			h.devices = append(h.devices, id)
		}
		if len(h.devices) > 0 {
			holders = append(holders, h)
		}
	}
	c.mu.Unlock()

	stats := &structs.NodeDeviceStats{NodeID: node.ID, SampledAt: now.UnixNano(), IntervalSeconds: c.cfg.TelemetryInterval.Seconds()}
	var nvmlIDs []string
	if node.NodeResources != nil {
		for _, g := range node.NodeResources.Devices {
			if g == nil {
				continue
			}
			simulated := g.Attributes["simulated"] != nil && g.Attributes["simulated"].Bool != nil && *g.Attributes["simulated"].Bool
			var total int64
			if m := g.Attributes["memory"]; m != nil && m.Int != nil {
				total = *m.Int
			}
			for _, in := range g.Instances {
				if in == nil {
					continue
				}
				ds := &structs.DeviceStats{
					ID: in.ID, Vendor: g.Vendor, Type: g.Type, Name: g.Name, Healthy: in.Healthy,
					MemoryTotalMiB: total, Simulated: simulated, SampledAt: now.UnixNano(),
				}
				if h := held[in.ID]; h != nil {
					ds.AllocID = h.ar.alloc.ID
				}
				if simulated {
					override := -1.0
					if a := g.Attributes[devices.AttrSimulatedIdleUtilization]; a != nil && a.Int != nil {
						override = float64(*a.Int)
					}
					if h := held[in.ID]; h != nil {
						override = structs.SimulatedUtilizationFor(h.ar.alloc.Job, h.ar.alloc.TaskGroup)
					}
					u := devices.SimulatedUsage(in.ID, held[in.ID] != nil, override, total, now)
					ds.UtilizationPercent, ds.MemoryUsedMiB = u.UtilizationPercent, u.MemoryUsedMiB
				} else if g.Vendor == structs.DeviceVendorNvidia {
					nvmlIDs = append(nvmlIDs, in.ID)
				}
				stats.Devices = append(stats.Devices, ds)
			}
		}
	}
	if len(nvmlIDs) > 0 {
		c.readNVML(stats, nvmlIDs)
	}
	sort.Slice(stats.Devices, func(i, j int) bool { return stats.Devices[i].ID < stats.Devices[j].ID })

	c.mu.Lock()
	c.tel.latest = stats
	c.mu.Unlock()
	c.applyIdlePolicy(now, stats, holders)
}

// readNVML fills the NVIDIA devices' figures from NVML, or their Error.
func (c *Client) readNVML(stats *structs.NodeDeviceStats, ids []string) {
	usage, errs, err := devices.SampleNVML(ids)
	c.mu.Lock()
	if err != nil && err.Error() != c.tel.nvmlErr {
		c.logger.Warn("cannot read GPU telemetry", "error", err)
	}
	c.tel.nvmlErr = ""
	if err != nil {
		c.tel.nvmlErr = err.Error()
	}
	c.mu.Unlock()
	for _, ds := range stats.Devices {
		if err != nil {
			if !ds.Simulated {
				ds.Error = err.Error()
			}
			continue
		}
		if u, ok := usage[ds.ID]; ok {
			ds.UtilizationPercent, ds.MemoryUsedMiB = u.UtilizationPercent, u.MemoryUsedMiB
			if u.MemoryTotalMiB > 0 {
				ds.MemoryTotalMiB = u.MemoryTotalMiB
			}
		} else if e := errs[ds.ID]; e != nil {
			ds.Error = e.Error()
		}
	}
}

// applyIdlePolicy stops each allocation with an idle policy whose GPUs have
// all been below its threshold for its duration. The stretch restarts when
// any of its GPUs goes at or above the threshold, or a sample of one fails.
func (c *Client) applyIdlePolicy(now time.Time, stats *structs.NodeDeviceStats, holders []*holder) {
	byID := make(map[string]*structs.DeviceStats, len(stats.Devices))
	for _, d := range stats.Devices {
		byID[d.ID] = d
	}
	var stop []*holder
	var reasons []string
	c.mu.Lock()
	seen := map[string]bool{}
	for _, h := range holders {
		id := h.ar.alloc.ID
		seen[id] = true
		policy, err := structs.IdlePolicyFor(h.ar.alloc.Job, h.ar.alloc.TaskGroup)
		if err != nil || policy == nil {
			// Job validation refuses bad policies; a job stored before that
			// check is left alone.
			delete(c.tel.idleSince, id)
			continue
		}
		idle := true
		var peak float64
		for _, dev := range h.devices {
			d := byID[dev]
			if d == nil || d.Error != "" || d.UtilizationPercent >= policy.BelowPercent {
				idle = false
				break
			}
			peak = max(peak, d.UtilizationPercent)
		}
		if !idle {
			delete(c.tel.idleSince, id)
			continue
		}
		since, ok := c.tel.idleSince[id]
		if !ok {
			c.tel.idleSince[id] = now
			continue
		}
		if now.Sub(since) >= policy.After {
			delete(c.tel.idleSince, id)
			stop = append(stop, h)
			reasons = append(reasons, fmt.Sprintf("GPUs below %g%% utilisation (peak %g%%) for %s; stopped by the idle policy", policy.BelowPercent, peak, now.Sub(since).Round(time.Second)))
		}
	}
	for id := range c.tel.idleSince {
		if !seen[id] {
			delete(c.tel.idleSince, id)
		}
	}
	c.mu.Unlock()
	for i, h := range stop {
		c.logger.Info("stopping idle allocation", "alloc_id", h.ar.alloc.ID, "reason", reasons[i])
		h.ar.stopIdle(reasons[i])
	}
}

// terminal reports whether the runner has finished or was told to stop:
// its GPUs no longer count as held.
func (ar *allocRunner) terminal() bool {
	select {
	case <-ar.done:
		return true
	default:
	}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return ar.stopRequested
}

// stopIdle records a TaskEventIdleGPU event with reason on every task, then
// stops the allocation; its tasks end dead and not failed.
func (ar *allocRunner) stopIdle(reason string) {
	ar.mu.Lock()
	names := make([]string, 0, len(ar.tasks))
	for n := range ar.tasks {
		names = append(names, n)
	}
	ar.mu.Unlock()
	now := time.Now().UnixNano()
	for _, n := range names {
		ar.updateTask(n, &structs.TaskEvent{Type: TaskEventIdleGPU, Time: now, Message: reason, DisplayMessage: reason}, nil)
	}
	ar.stop()
}
