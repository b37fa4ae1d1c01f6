//go:build cgo && linux

package devices

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/hashicorp/go-hclog"
)

// fakeHost is go-nvml's DGX H100 mock server (8 H100 80GB GPUs) with the
// calls the health source makes and the mock leaves unset: PCI bus IDs,
// row remapping, page retirement, supported events, event registration and
// an event set whose Wait returns what the test sends. Faults are set
// through its fields under mu, before or while a monitor runs.
type fakeHost struct {
	*server.Server
	devs []*server.Device

	events chan nvml.EventData

	mu sync.Mutex
	// memErr makes GetMemoryInfo of a UUID fail.
	memErr map[string]nvml.Return
	// remapFailed marks a UUID's row remapping as failed.
	remapFailed map[string]bool
	// noEvents makes GetSupportedEventTypes of a UUID fail.
	noEvents map[string]bool
	// registered maps a UUID to the event mask registered for it.
	registered map[string]uint64
	// createRet, when not SUCCESS, makes EventSetCreate fail.
	createRet nvml.Return
	freed     bool
	shutdowns int
}

func newFakeHost(t *testing.T) *fakeHost {
	t.Helper()
	h := &fakeHost{
		Server: dgxh100.New(), events: make(chan nvml.EventData),
		memErr: map[string]nvml.Return{}, remapFailed: map[string]bool{}, noEvents: map[string]bool{},
		registered: map[string]uint64{}, createRet: nvml.SUCCESS,
	}
	for _, d := range h.Devices {
		dev := d.(*server.Device)
		h.devs = append(h.devs, dev)
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			p := nvml.PciInfo{PciDeviceId: dev.Config.PciDeviceId}
			for i, c := range dev.PciBusID {
				p.BusId[i] = int8(c)
			}
			return p, nvml.SUCCESS
		}
		dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if ret, ok := h.memErr[dev.UUID]; ok {
				return nvml.Memory{}, ret
			}
			return dev.MemoryInfo, nvml.SUCCESS
		}
		dev.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return 0, 0, false, h.remapFailed[dev.UUID], nvml.SUCCESS
		}
		dev.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
			return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
		}
		dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.noEvents[dev.UUID] {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return nvml.EventTypeAll, nvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(mask uint64, _ nvml.EventSet) nvml.Return {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.registered[dev.UUID] = mask
			return nvml.SUCCESS
		}
	}
	h.Interface.ShutdownFunc = func() nvml.Return {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.shutdowns++
		return nvml.SUCCESS
	}
	h.Interface.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.createRet != nvml.SUCCESS {
			return nil, h.createRet
		}
		return &mock.EventSet{
			WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
				t := time.NewTimer(time.Duration(ms) * time.Millisecond)
				defer t.Stop()
				select {
				case ev := <-h.events:
					return ev, nvml.SUCCESS
				case <-t.C:
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return {
				h.mu.Lock()
				defer h.mu.Unlock()
				h.freed = true
				return nvml.SUCCESS
			},
		}, nvml.SUCCESS
	}
	return h
}

func (h *fakeHost) uuids() []string {
	out := make([]string, len(h.devs))
	for i, d := range h.devs {
		out[i] = d.UUID
	}
	return out
}

func (h *fakeHost) set(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn()
}

// xid is an XID event on dev (nil: no device), for the whole GPU.
func xid(dev nvml.Device, n uint64) nvml.EventData {
	return nvml.EventData{Device: dev, EventType: nvml.EventTypeXidCriticalError, EventData: n, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
}

// monitorRun is an nvmlHealth running against a fakeHost with a test
// clock, a tick the test drives, and every report recorded.
type monitorRun struct {
	t     *testing.T
	h     *fakeHost
	m     *nvmlHealth
	tick  chan time.Time
	steps chan string
	done  chan struct{}
	stop  context.CancelFunc

	mu      sync.Mutex
	now     time.Time
	reports []DeviceHealth
	last    map[string]DeviceHealth
}

// testTime is the test clock's start.
var testTime = time.Date(2026, 12, 1, 2, 10, 0, 0, time.UTC)

// startMonitor runs a monitor over ids and waits for its first probe
// round. The monitor is stopped when the test ends.
func startMonitor(t *testing.T, h *fakeHost, ids []string) *monitorRun {
	t.Helper()
	r := &monitorRun{t: t, h: h, tick: make(chan time.Time), steps: make(chan string, 64), done: make(chan struct{}),
		now: testTime, last: map[string]DeviceHealth{}}
	r.m = &nvmlHealth{
		lib: h, interval: time.Hour, logger: hclog.NewNullLogger(),
		tick: r.tick, eventWait: 10 * time.Millisecond,
		now:  func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now },
		step: func(what string) { r.steps <- what },
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() {
		defer close(r.done)
		r.m.Run(ctx, ids, func(c DeviceHealth) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.reports = append(r.reports, c)
			r.last[c.ID] = c
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	r.waitStep("probe")
	return r
}

// waitStep waits up to 10 s for the monitor to finish applying an event
// or a probe round.
func (r *monitorRun) waitStep(want string) {
	r.t.Helper()
	select {
	case got := <-r.steps:
		if got != want {
			r.t.Fatalf("monitor step %q, want %q", got, want)
		}
	case <-r.done:
		r.t.Fatalf("monitor stopped while waiting for %q", want)
	case <-time.After(10 * time.Second):
		r.t.Fatalf("monitor did not apply a %q within 10s", want)
	}
}

// send hands ev to the event set and waits until the monitor applied it.
func (r *monitorRun) send(ev nvml.EventData) {
	r.t.Helper()
	select {
	case r.h.events <- ev:
	case <-time.After(10 * time.Second):
		r.t.Fatal("event set not waited on within 10s")
	}
	r.waitStep("event")
}

// probe advances the clock by d, runs one probe round and waits for it.
func (r *monitorRun) probe(d time.Duration) {
	r.t.Helper()
	r.mu.Lock()
	r.now = r.now.Add(d)
	now := r.now
	r.mu.Unlock()
	r.tick <- now
	r.waitStep("probe")
}

// take returns the reports since the last take.
func (r *monitorRun) take() []DeviceHealth {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reports
	r.reports = nil
	return out
}

// healthy reports an instance's latest health (healthy when never
// reported).
func (r *monitorRun) healthy(id string) (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.last[id]
	if !ok {
		return true, HealthyDescription
	}
	return c.Healthy, c.Description
}

func describe(cs []DeviceHealth) string {
	s := ""
	for _, c := range cs {
		s += fmt.Sprintf("\n  %s healthy=%v %q", c.ID, c.Healthy, c.Description)
	}
	return s
}
