package devices

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestXIDReason(t *testing.T) {
	cases := []struct {
		xid  uint64
		want string
		app  bool
	}{
		{79, "XID 79 (GPU has fallen off the bus)", false},
		{48, "XID 48 (double-bit ECC error)", false},
		{13, "XID 13 (graphics engine exception)", true},
		{31, "XID 31 (GPU memory page fault)", true},
		{109, "XID 109 (context switch timeout error)", true},
		{150, "XID 150", false},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			if got := XIDReason(tc.xid); got != tc.want {
				t.Errorf("XIDReason(%d) = %q, want %q", tc.xid, got, tc.want)
			}
			if got := IsApplicationXID(tc.xid); got != tc.app {
				t.Errorf("IsApplicationXID(%d) = %v, want %v", tc.xid, got, tc.app)
			}
		})
	}
	at := time.Date(2026, 12, 1, 3, 10, 0, 0, time.FixedZone("CET", 3600))
	if got, want := UnhealthyDescription(XIDReason(79), at), "unhealthy: XID 79 (GPU has fallen off the bus) at 2026-12-01T02:10:00Z"; got != want {
		t.Errorf("UnhealthyDescription = %q, want %q", got, want)
	}
}

// TestHealthTracker walks the shared rules step by step: each step is a
// fault ("xid") or a probe ("ok" or "fail"), and the instance's health
// after it.
func TestHealthTracker(t *testing.T) {
	type step struct {
		op      string
		healthy bool
		report  bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"fault, one busy interval, one quiet", []step{{"xid", false, true}, {"ok", false, false}, {"ok", true, true}}},
		{"faults every interval stay out", []step{{"xid", false, true}, {"ok", false, false}, {"xid", false, false}, {"ok", false, false}, {"xid", false, false}, {"ok", false, false}, {"ok", true, true}}},
		{"failed probe comes back at the next good one", []step{{"fail", false, true}, {"fail", false, false}, {"ok", true, true}}},
		{"xid then failing probe changes the reason", []step{{"xid", false, true}, {"fail", false, true}, {"ok", true, true}}},
		{"healthy probes report nothing", []step{{"ok", true, false}, {"ok", true, false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newHealthTracker([]string{"GPU-a", "GPU-b"})
			at := time.Unix(1_800_000_000, 0)
			for i, s := range tc.steps {
				at = at.Add(30 * time.Second)
				var got []DeviceHealth
				switch s.op {
				case "xid":
					got = tr.fault("GPU-a", XIDReason(79), at)
				case "ok", "fail":
					var err error
					if s.op == "fail" {
						err = errors.New("NVML memory query: ERROR_GPU_IS_LOST")
					}
					if c, ok := tr.probe("GPU-a", err, at); ok {
						got = append(got, c)
					}
				}
				if tr.devs["GPU-a"].healthy != s.healthy {
					t.Fatalf("step %d (%s): healthy=%v, want %v", i, s.op, tr.devs["GPU-a"].healthy, s.healthy)
				}
				if (len(got) == 1) != s.report || len(got) > 1 {
					t.Fatalf("step %d (%s): reports %+v, want report=%v", i, s.op, got, s.report)
				}
				if s.report && (got[0].ID != "GPU-a" || got[0].Healthy != s.healthy || !got[0].Since.Equal(at)) {
					t.Fatalf("step %d (%s): report %+v", i, s.op, got[0])
				}
			}
			if !tr.devs["GPU-b"].healthy {
				t.Fatal("the other instance changed")
			}
		})
	}
	t.Run("fault on every instance", func(t *testing.T) {
		tr := newHealthTracker([]string{"GPU-a", "GPU-b", "GPU-a", ""})
		if got := tr.fault("", "NVML event wait: ERROR_UNKNOWN", time.Now()); len(got) != 2 {
			t.Fatalf("%d reports, want 2 (duplicates and empty IDs dropped)", len(got))
		}
		if got := tr.fault("GPU-x", "XID 79", time.Now()); got != nil {
			t.Fatalf("unknown instance reported %+v", got)
		}
	})
}

// recorder collects reports from a HealthSource.
type recorder struct {
	mu   sync.Mutex
	last map[string]DeviceHealth
	n    int
}

func (r *recorder) report(c DeviceHealth) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]DeviceHealth{}
	}
	r.last[c.ID] = c
	r.n++
}

func (r *recorder) get(id string) (DeviceHealth, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[id], r.n
}

func TestSimulatedHealth(t *testing.T) {
	s := NewSimulatedHealth(0)
	if err := s.InjectXID("GPU-sim-0", 79); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("InjectXID before Run: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var rec recorder
	go func() {
		defer close(done)
		s.Run(ctx, []string{"GPU-sim-0", "GPU-sim-1"}, rec.report)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.Probe() != nil {
		if time.Now().After(deadline) {
			t.Fatal("Run did not start within 10s")
		}
		time.Sleep(time.Millisecond)
	}

	if err := s.InjectXID("GPU-sim-0", 13); err != nil {
		t.Fatal(err)
	}
	if _, n := rec.get("GPU-sim-0"); n != 0 {
		t.Fatalf("application XID reported %d changes", n)
	}
	if err := s.InjectXID("GPU-sim-9", 79); err == nil {
		t.Fatal("XID on an unwatched device accepted")
	}
	if err := s.InjectXID("GPU-sim-0", 79); err != nil {
		t.Fatal(err)
	}
	if c, _ := rec.get("GPU-sim-0"); c.Healthy || !strings.HasPrefix(c.Description, "unhealthy: XID 79 (GPU has fallen off the bus) at ") {
		t.Fatalf("after XID 79: %+v", c)
	}
	s.SetProbeError("GPU-sim-1", errors.New("simulated probe failure"))
	_ = s.Probe()
	if c, _ := rec.get("GPU-sim-0"); c.Healthy {
		t.Fatal("healthy at the first probe after the XID")
	}
	if c, _ := rec.get("GPU-sim-1"); c.Healthy {
		t.Fatal("a failing probe left GPU-sim-1 healthy")
	}
	s.SetProbeError("GPU-sim-1", nil)
	_ = s.Probe()
	for _, id := range []string{"GPU-sim-0", "GPU-sim-1"} {
		if c, _ := rec.get(id); !c.Healthy || c.Description != HealthyDescription {
			t.Fatalf("%s after a quiet probe: %+v", id, c)
		}
	}

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel")
	}
	if err := s.Probe(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Probe after Run: %v", err)
	}
}
