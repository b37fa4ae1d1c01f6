//go:build cgo && linux

package devices

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"
)

// TestNVMLHealthEvents drives the NVML health source with XID events on
// go-nvml's DGX H100 mock.
func TestNVMLHealthEvents(t *testing.T) {
	t.Run("XID 79 marks exactly that GPU", func(t *testing.T) {
		h := newFakeHost(t)
		r := startMonitor(t, h, h.uuids())
		if got := r.take(); len(got) != 0 {
			t.Fatalf("reports before any fault:%s", describe(got))
		}
		r.send(xid(h.devs[3], 79))
		got := r.take()
		want := "unhealthy: XID 79 (GPU has fallen off the bus) at 2026-12-01T02:10:00Z"
		if len(got) != 1 || got[0].ID != h.devs[3].UUID || got[0].Healthy || got[0].Description != want {
			t.Fatalf("reports:%s\nwant one for %s: %q", describe(got), h.devs[3].UUID, want)
		}
	})
	t.Run("application XID 13 does not", func(t *testing.T) {
		h := newFakeHost(t)
		r := startMonitor(t, h, h.uuids())
		for _, n := range []uint64{13, 31, 43, 45, 68, 109} {
			r.send(xid(h.devs[2], n))
		}
		if got := r.take(); len(got) != 0 {
			t.Fatalf("application XIDs changed health:%s", describe(got))
		}
	})
	t.Run("unknown XID and double-bit ECC", func(t *testing.T) {
		h := newFakeHost(t)
		r := startMonitor(t, h, h.uuids())
		r.send(xid(h.devs[1], 150))
		r.send(nvml.EventData{Device: h.devs[2], EventType: nvml.EventTypeDoubleBitEccError, GpuInstanceId: noInstance, ComputeInstanceId: noInstance})
		got := r.take()
		if len(got) != 2 || got[0].ID != h.devs[1].UUID || !strings.HasPrefix(got[0].Description, "unhealthy: XID 150 at ") ||
			got[1].ID != h.devs[2].UUID || !strings.HasPrefix(got[1].Description, "unhealthy: double-bit ECC error at ") {
			t.Fatalf("reports:%s", describe(got))
		}
	})
	t.Run("event without a device marks all", func(t *testing.T) {
		h := newFakeHost(t)
		r := startMonitor(t, h, h.uuids())
		r.send(xid(nil, 79))
		if got := r.take(); len(got) != 8 {
			t.Fatalf("%d reports, want 8:%s", len(got), describe(got))
		}
		for _, id := range h.uuids() {
			if ok, _ := r.healthy(id); ok {
				t.Errorf("%s still healthy", id)
			}
		}
	})
}

// TestNVMLHealthReprobe checks the re-probe rule: a GPU comes back only at
// a successful probe with no critical XID since the probe before it.
func TestNVMLHealthReprobe(t *testing.T) {
	t.Run("returns after a quiet interval", func(t *testing.T) {
		h := newFakeHost(t)
		id := h.devs[4].UUID
		r := startMonitor(t, h, h.uuids())
		r.send(xid(h.devs[4], 79))
		r.probe(30 * time.Second)
		if ok, d := r.healthy(id); ok {
			t.Fatalf("healthy at the first probe after the XID: %q", d)
		}
		r.take()
		r.probe(30 * time.Second)
		got := r.take()
		if len(got) != 1 || got[0].ID != id || !got[0].Healthy || got[0].Description != HealthyDescription || !got[0].Since.Equal(testTime.Add(time.Minute)) {
			t.Fatalf("reports after a quiet interval:%s", describe(got))
		}
	})
	t.Run("a GPU that keeps raising XIDs stays out", func(t *testing.T) {
		h := newFakeHost(t)
		id := h.devs[6].UUID
		r := startMonitor(t, h, h.uuids())
		for i := 0; i < 4; i++ {
			r.send(xid(h.devs[6], 79))
			r.probe(30 * time.Second)
			if ok, _ := r.healthy(id); ok {
				t.Fatalf("round %d: healthy while XIDs keep coming", i)
			}
		}
		got := r.take()
		if len(got) != 1 || got[0].Description != "unhealthy: XID 79 (GPU has fallen off the bus) at 2026-12-01T02:10:00Z" {
			t.Fatalf("a repeated XID is reported once, with its first time:%s", describe(got))
		}
		r.probe(30 * time.Second)
		if ok, d := r.healthy(id); !ok {
			t.Fatalf("still unhealthy after a quiet interval: %q", d)
		}
	})
	t.Run("failed memory query, then recovery", func(t *testing.T) {
		h := newFakeHost(t)
		id := h.devs[0].UUID
		h.set(func() { h.memErr[id] = nvml.ERROR_GPU_IS_LOST })
		r := startMonitor(t, h, h.uuids())
		got := r.take()
		if len(got) != 1 || got[0].ID != id || got[0].Healthy ||
			got[0].Description != "unhealthy: NVML memory query: ERROR_GPU_IS_LOST at 2026-12-01T02:10:00Z" {
			t.Fatalf("reports after the first probe:%s", describe(got))
		}
		r.probe(30 * time.Second)
		if got := r.take(); len(got) != 0 {
			t.Fatalf("the same failure is reported again:%s", describe(got))
		}
		h.set(func() { delete(h.memErr, id) })
		r.probe(30 * time.Second)
		if ok, d := r.healthy(id); !ok {
			t.Fatalf("not healthy after a successful probe: %q", d)
		}
	})
	t.Run("row remapping failure", func(t *testing.T) {
		h := newFakeHost(t)
		h.set(func() { h.remapFailed[h.devs[7].UUID] = true })
		r := startMonitor(t, h, h.uuids())
		if ok, d := r.healthy(h.devs[7].UUID); ok || !strings.Contains(d, "row remapping failed") {
			t.Fatalf("healthy=%v %q", ok, d)
		}
	})
}

// TestNVMLHealthRegistration: every GPU is registered for critical XID and
// double-bit ECC events; a GPU without event support, or a host without
// event sets, falls back to the periodic queries.
func TestNVMLHealthRegistration(t *testing.T) {
	want := uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError)
	t.Run("all registered", func(t *testing.T) {
		h := newFakeHost(t)
		startMonitor(t, h, h.uuids())
		h.set(func() {
			if len(h.registered) != 8 {
				t.Errorf("%d GPUs registered, want 8", len(h.registered))
			}
			for id, mask := range h.registered {
				if mask != want {
					t.Errorf("%s registered for %#x, want %#x", id, mask, want)
				}
			}
		})
	})
	t.Run("a GPU without events is still probed", func(t *testing.T) {
		h := newFakeHost(t)
		id := h.devs[1].UUID
		h.set(func() { h.noEvents[id] = true })
		r := startMonitor(t, h, h.uuids())
		h.set(func() {
			if _, ok := h.registered[id]; ok || len(h.registered) != 7 {
				t.Errorf("registered %v; want the 7 others", h.registered)
			}
		})
		h.set(func() { h.memErr[id] = nvml.ERROR_UNKNOWN })
		r.probe(30 * time.Second)
		if ok, _ := r.healthy(id); ok {
			t.Fatal("a failing probe of an event-less GPU left it healthy")
		}
	})
	t.Run("no event set", func(t *testing.T) {
		h := newFakeHost(t)
		h.set(func() { h.createRet = nvml.ERROR_NOT_SUPPORTED })
		r := startMonitor(t, h, h.uuids())
		h.set(func() { h.memErr[h.devs[2].UUID] = nvml.ERROR_UNKNOWN })
		r.probe(30 * time.Second)
		if ok, _ := r.healthy(h.devs[2].UUID); ok {
			t.Fatal("probes do not run without events")
		}
	})
}

// TestNVMLHealthMIG: an XID naming a GPU instance marks only that MIG
// slice; one for the whole GPU marks both slices.
func TestNVMLHealthMIG(t *testing.T) {
	h := newFakeHost(t)
	slices := withMIG(t, h)
	// The mock numbers the two GPU instances 0 and 1.
	ids := append([]string{h.devs[1].UUID}, slices...)
	r := startMonitor(t, h, ids)
	h.set(func() {
		if _, ok := h.registered[h.devs[0].UUID]; !ok {
			t.Errorf("the MIG slices' parent is not registered: %v", h.registered)
		}
	})
	r.send(nvml.EventData{Device: h.devs[0], EventType: nvml.EventTypeXidCriticalError, EventData: 94, GpuInstanceId: 1, ComputeInstanceId: 0})
	got := r.take()
	if len(got) != 1 || got[0].ID != slices[1] {
		t.Fatalf("XID on GPU instance 1:%s\nwant only %s", describe(got), slices[1])
	}
	r.send(xid(h.devs[0], 79))
	got = r.take()
	if len(got) != 2 || got[0].ID != slices[0] || got[1].ID != slices[1] {
		t.Fatalf("XID on the whole GPU:%s\nwant both slices", describe(got))
	}
	if ok, _ := r.healthy(h.devs[1].UUID); !ok {
		t.Fatal("another GPU was marked")
	}
}

// TestNVMLHealthStops: Run returns once its context is done, after its
// event goroutine (the event set is freed only after that goroutine has
// stopped waiting on it) and NVML is shut down; and a host where NVML
// cannot start returns at once without reports.
func TestNVMLHealthStops(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		h := newFakeHost(t)
		r := startMonitor(t, h, h.uuids())
		r.stop()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return within 10s of cancel")
		}
		h.set(func() {
			if !h.freed || h.shutdowns != 1 {
				t.Fatalf("event set freed %v, NVML shut down %d times", h.freed, h.shutdowns)
			}
		})
	})
	t.Run("no NVML", func(t *testing.T) {
		h := newFakeHost(t)
		h.Interface.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
		m := &nvmlHealth{lib: h, interval: time.Hour, logger: hclog.NewNullLogger()}
		done := make(chan struct{})
		reports := 0
		go func() {
			defer close(done)
			m.Run(context.Background(), h.uuids(), func(DeviceHealth) { reports++ })
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run without NVML did not return")
		}
		if reports != 0 {
			t.Fatalf("%d reports without NVML", reports)
		}
	})
}

// TestNVMLHealthOnHost runs the health source against the host's own NVML
// for its first probe round: every GPU that Detect lists healthy is probed
// healthy. It skips where NVML is unavailable (every host without an
// NVIDIA driver).
func TestNVMLHealthOnHost(t *testing.T) {
	groups, err := Detect()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("no NVML here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range groups {
		for _, in := range g.Instances {
			if in.Healthy {
				ids = append(ids, in.ID)
			}
		}
	}
	if len(ids) == 0 {
		t.Skip("NVML works but reports no healthy GPU")
	}
	steps := make(chan string, 8)
	var mu sync.Mutex
	var reports []DeviceHealth
	m := &nvmlHealth{
		lib: nvml.New(), interval: time.Hour,
		logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: testLogWriter{t}}),
		step:   func(what string) { steps <- what },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, ids, func(c DeviceHealth) { mu.Lock(); reports = append(reports, c); mu.Unlock() })
	}()
	select {
	case <-steps:
	case <-done:
		t.Fatal("Run returned before its first probe round")
	case <-time.After(30 * time.Second):
		t.Fatal("no probe round within 30s")
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 0 {
		t.Fatalf("GPUs Detect found healthy probed unhealthy:%s", describe(reports))
	}
	t.Logf("probed %d GPUs healthy: %v", len(ids), ids)
}

// testLogWriter sends log lines to t.Log.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
