//go:build cgo && linux

package devices

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"
)

// healthEventMask is the NVML events the health source registers for,
// each masked by what the device supports: critical XIDs and double-bit
// ECC errors. P-state changes are left out: they are power management,
// not faults.
const healthEventMask = uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError)

// noInstance is NVML's "no GPU/compute instance" ID in event data
// (0xFFFFFFFF): the event concerns the whole GPU.
const noInstance = 0xFFFFFFFF

// defaultEventWait is how long one EventSet.Wait blocks, and so how long
// Run may take to return once its context is done.
const defaultEventWait = time.Second

// NewNVMLHealth returns the health source for NVIDIA GPUs, reading
// libnvidia-ml through nvml.New. It never fails in a cgo build on Linux;
// a host without the library is found when Run starts (Run then logs and
// returns).
func NewNVMLHealth(cfg NVMLHealthConfig) (HealthSource, error) {
	cfg = cfg.withDefaults()
	return &nvmlHealth{lib: nvml.New(), interval: cfg.Interval, logger: cfg.Logger}, nil
}

// nvmlHealth is the NVML HealthSource. Run registers every GPU in one NVML
// event set for healthEventMask, waits on it in a goroutine of its own,
// and probes every instance at start and every interval: a device handle
// by UUID and its memory information, then (whole GPUs) row remapping and
// pending page retirement where the GPU supports them. Events and probes
// are applied by one goroutine, in the order they arrive, with the rules
// of healthTracker.
//
// A MIG slice (a "MIG-…" UUID) is watched through its parent GPU's events:
// an event that names a GPU instance and compute instance marks only the
// matching slice, one for the whole GPU marks all its slices, as NVIDIA's
// k8s-device-plugin does (internal/rm/health.go). An event whose device
// cannot be identified marks every instance.
type nvmlHealth struct {
	lib      nvml.Interface
	interval time.Duration
	logger   hclog.Logger

	// Test hooks, zero in production: tick replaces the interval ticker,
	// now the clock, eventWait defaultEventWait, and step is called after
	// each event ("event") and probe round ("probe") is applied.
	tick      <-chan time.Time
	now       func() time.Time
	eventWait time.Duration
	step      func(what string)
}

// nvmlTarget is one watched instance.
type nvmlTarget struct {
	id  string
	mig bool
	// parent is a MIG slice's GPU UUID; gi and ci its GPU and compute
	// instance IDs (noInstance when unknown).
	parent string
	gi, ci uint32
	// dev is the handle of the GPU whose events cover this instance (the
	// parent, for a slice); nil when NVML could not resolve it.
	dev nvml.Device
}

// nvmlEvent is what the event goroutine hands to Run's loop: an event, or
// the error of a failed wait.
type nvmlEvent struct {
	data nvml.EventData
	err  error
}

// Run implements HealthSource.
func (m *nvmlHealth) Run(ctx context.Context, ids []string, report func(DeviceHealth)) {
	if ret := m.lib.Init(); ret != nvml.SUCCESS {
		m.logger.Warn("GPU health monitor not started: NVML unavailable", "error", ret.Error())
		return
	}
	defer func() { _ = m.lib.Shutdown() }()

	tr := newHealthTracker(ids)
	targets := m.resolve(tr.order)
	events := make(chan nvmlEvent)
	var wg sync.WaitGroup
	if set := m.register(targets); set != nil {
		defer func() { _ = set.Free() }()
		wg.Add(1)
		go func() { defer wg.Done(); m.waitEvents(ctx, set, events) }()
	}
	// Runs before Free and Shutdown: the waiting goroutine is gone first.
	defer wg.Wait()

	tick := m.tick
	if tick == nil {
		t := time.NewTicker(m.interval)
		defer t.Stop()
		tick = t.C
	}
	m.logger.Info("GPU health monitor started", "devices", len(targets), "interval", m.interval)
	m.probeAll(tr, targets, report)
	m.stepped("probe")
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			m.handle(tr, targets, ev, report)
			m.stepped("event")
		case <-tick:
			m.probeAll(tr, targets, report)
			m.stepped("probe")
		}
	}
}

func (m *nvmlHealth) clock() time.Time {
	if m.now != nil {
		return m.now()
	}
	return time.Now()
}

func (m *nvmlHealth) stepped(what string) {
	if m.step != nil {
		m.step(what)
	}
}

// resolve finds each instance's handle and, for a MIG slice, its parent
// GPU and instance IDs. An instance NVML cannot resolve is kept without a
// handle: its probes fail and say why.
func (m *nvmlHealth) resolve(ids []string) []nvmlTarget {
	out := make([]nvmlTarget, 0, len(ids))
	for _, id := range ids {
		t := nvmlTarget{id: id, gi: noInstance, ci: noInstance}
		dev, ret := m.lib.DeviceGetHandleByUUID(id)
		if ret != nvml.SUCCESS {
			m.logger.Warn("cannot watch GPU events: no NVML handle", "device", id, "error", ret.Error())
			out = append(out, t)
			continue
		}
		if !strings.HasPrefix(id, "MIG-") {
			t.dev = dev
			out = append(out, t)
			continue
		}
		t.mig = true
		parent, ret := dev.GetDeviceHandleFromMigDeviceHandle()
		if ret == nvml.SUCCESS {
			t.parent, ret = parent.GetUUID()
		}
		if ret != nvml.SUCCESS {
			m.logger.Warn("cannot watch MIG slice events: parent GPU unknown", "device", id, "error", ret.Error())
			out = append(out, t)
			continue
		}
		t.dev = parent
		if gi, ret := dev.GetGpuInstanceId(); ret == nvml.SUCCESS {
			t.gi = uint32(gi)
		}
		if ci, ret := dev.GetComputeInstanceId(); ret == nvml.SUCCESS {
			t.ci = uint32(ci)
		}
		out = append(out, t)
	}
	return out
}

// register creates the event set and registers every GPU once for the
// events of healthEventMask it supports. It returns nil, having logged
// why, when no GPU could be registered: health then comes from the
// periodic probes alone.
func (m *nvmlHealth) register(targets []nvmlTarget) nvml.EventSet {
	set, ret := m.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		m.logger.Warn("NVML events unavailable; GPU health from periodic queries only", "error", ret.Error())
		return nil
	}
	seen := map[string]bool{}
	registered := 0
	for _, t := range targets {
		if t.dev == nil {
			continue
		}
		gpu := t.id
		if t.mig {
			gpu = t.parent
		}
		if seen[gpu] {
			continue
		}
		seen[gpu] = true
		supported, ret := t.dev.GetSupportedEventTypes()
		if ret != nvml.SUCCESS {
			m.logger.Warn("cannot read the GPU's supported NVML events; its health comes from periodic queries only", "device", gpu, "error", ret.Error())
			continue
		}
		mask := healthEventMask & supported
		if mask == 0 {
			m.logger.Warn("GPU supports no XID or ECC events; its health comes from periodic queries only", "device", gpu)
			continue
		}
		if ret := t.dev.RegisterEvents(mask, set); ret != nvml.SUCCESS {
			m.logger.Warn("cannot register for the GPU's NVML events; its health comes from periodic queries only", "device", gpu, "error", ret.Error())
			continue
		}
		registered++
	}
	if registered == 0 {
		_ = set.Free()
		return nil
	}
	return set
}

// waitEvents waits on set until ctx is done and hands every event, or
// failed wait, to out. After a failed wait it pauses for one wait period,
// so a broken event set does not spin.
func (m *nvmlHealth) waitEvents(ctx context.Context, set nvml.EventSet, out chan<- nvmlEvent) {
	wait := m.eventWait
	if wait <= 0 {
		wait = defaultEventWait
	}
	for ctx.Err() == nil {
		data, ret := set.Wait(uint32(wait / time.Millisecond))
		if ret == nvml.ERROR_TIMEOUT {
			continue
		}
		ev := nvmlEvent{data: data}
		if ret != nvml.SUCCESS {
			ev = nvmlEvent{err: fmt.Errorf("NVML event wait: %s", ret.Error())}
		}
		select {
		case out <- ev:
		case <-ctx.Done():
			return
		}
		if ev.err != nil {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// handle applies one event: a critical XID (not an application one) or a
// double-bit ECC error marks the instances it concerns unhealthy; a failed
// wait marks every instance.
func (m *nvmlHealth) handle(tr *healthTracker, targets []nvmlTarget, ev nvmlEvent, report func(DeviceHealth)) {
	now := m.clock()
	if ev.err != nil {
		m.logger.Warn("NVML event wait failed; marking every GPU unhealthy", "error", ev.err)
		for _, c := range tr.fault("", ev.err.Error(), now) {
			report(c)
		}
		return
	}
	d := ev.data
	var reason string
	switch {
	case d.EventType&nvml.EventTypeXidCriticalError != 0:
		if IsApplicationXID(d.EventData) {
			m.logger.Info("application XID does not affect GPU health", "xid", d.EventData, "device", eventDevice(d))
			return
		}
		reason = XIDReason(d.EventData)
	case d.EventType&nvml.EventTypeDoubleBitEccError != 0:
		reason = "double-bit ECC error"
	default:
		return
	}
	ids := affected(targets, d)
	m.logger.Warn("critical GPU event", "reason", reason, "device", eventDevice(d), "instances", ids)
	for _, id := range ids {
		for _, c := range tr.fault(id, reason, now) {
			report(c)
		}
	}
}

// eventDevice names the event's GPU for logs.
func eventDevice(d nvml.EventData) string {
	if d.Device == nil {
		return "all"
	}
	if uuid, ret := d.Device.GetUUID(); ret == nvml.SUCCESS {
		return uuid
	}
	return "unknown"
}

// affected returns the watched instances the event concerns: every one
// when its device cannot be identified; else the GPU itself, or those of
// its MIG slices that match the event's GPU and compute instance IDs.
func affected(targets []nvmlTarget, d nvml.EventData) []string {
	all := func() []string {
		ids := make([]string, len(targets))
		for i, t := range targets {
			ids[i] = t.id
		}
		return ids
	}
	if d.Device == nil {
		return all()
	}
	uuid, ret := d.Device.GetUUID()
	if ret != nvml.SUCCESS {
		return all()
	}
	var ids []string
	for _, t := range targets {
		switch {
		case !t.mig && t.id == uuid:
		case t.mig && t.parent == uuid:
			if d.GpuInstanceId != noInstance && t.gi != noInstance && t.gi != d.GpuInstanceId {
				continue
			}
			if d.ComputeInstanceId != noInstance && t.ci != noInstance && t.ci != d.ComputeInstanceId {
				continue
			}
		default:
			continue
		}
		ids = append(ids, t.id)
	}
	return ids
}

// probeAll probes every instance and reports the changes.
func (m *nvmlHealth) probeAll(tr *healthTracker, targets []nvmlTarget, report func(DeviceHealth)) {
	now := m.clock()
	for _, t := range targets {
		if c, ok := tr.probe(t.id, m.probe(t), now); ok {
			report(c)
		}
	}
}

// probe queries one instance: its handle by UUID and its memory, then for
// a whole GPU its row remapping state (Ampere and later) and pending page
// retirement (earlier GPUs). A query the GPU does not support is skipped.
// The error says what failed.
func (m *nvmlHealth) probe(t nvmlTarget) error {
	dev, ret := m.lib.DeviceGetHandleByUUID(t.id)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("NVML handle: %s", ret.Error())
	}
	if _, ret := dev.GetMemoryInfo(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML memory query: %s", ret.Error())
	}
	if t.mig {
		return nil
	}
	if _, _, pending, failed, ret := dev.GetRemappedRows(); ret == nvml.SUCCESS {
		if failed {
			return errors.New("row remapping failed")
		}
		if pending {
			return errors.New("row remapping pending (reset the GPU)")
		}
	}
	if st, ret := dev.GetRetiredPagesPendingStatus(); ret == nvml.SUCCESS && st == nvml.FEATURE_ENABLED {
		return errors.New("retired pages pending (reset the GPU)")
	}
	return nil
}
