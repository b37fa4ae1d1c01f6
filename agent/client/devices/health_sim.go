package devices

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// SimulatedHealth is a HealthSource for simulated GPUs (tests, the node
// simulator): faults are injected with InjectXID and SetProbeError, and
// probes run every interval or when Probe is called. It follows the same
// rules as the NVML source (see healthTracker): an application XID is
// ignored, a critical one marks the instance unhealthy, and an unhealthy
// instance returns at a successful probe with no XID since the probe
// before it. Safe for concurrent use; one Run at a time.
type SimulatedHealth struct {
	interval time.Duration

	mu       sync.Mutex
	tr       *healthTracker
	report   func(DeviceHealth)
	probeErr map[string]error
}

// NewSimulatedHealth returns a simulated source that probes every interval
// while it runs; an interval of 0 or less probes only when Probe is
// called.
func NewSimulatedHealth(interval time.Duration) *SimulatedHealth {
	return &SimulatedHealth{interval: interval, probeErr: map[string]error{}}
}

// Run implements HealthSource. A second Run while one runs returns at
// once.
func (s *SimulatedHealth) Run(ctx context.Context, ids []string, report func(DeviceHealth)) {
	s.mu.Lock()
	if s.report != nil {
		s.mu.Unlock()
		return
	}
	s.tr, s.report = newHealthTracker(ids), report
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.tr, s.report = nil, nil
		s.mu.Unlock()
	}()
	var tick <-chan time.Time
	if s.interval > 0 {
		t := time.NewTicker(s.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			_ = s.Probe()
		}
	}
}

// InjectXID raises XID xid on the instance id, or on every instance when
// id is empty, as an NVML XID event would. An application XID (see
// IsApplicationXID) changes nothing. It returns an error wrapping
// ErrNotRunning while Run is not running, and one naming id when id is
// not watched.
func (s *SimulatedHealth) InjectXID(id string, xid uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.report == nil {
		return fmt.Errorf("inject XID %d: %w", xid, ErrNotRunning)
	}
	if id != "" && !s.tr.has(id) {
		return fmt.Errorf("inject XID %d: device %q is not watched", xid, id)
	}
	if IsApplicationXID(xid) {
		return nil
	}
	for _, c := range s.tr.fault(id, XIDReason(xid), time.Now()) {
		s.report(c)
	}
	return nil
}

// SetProbeError makes every later probe of id fail with err, until it is
// called again with a nil err. It may be called before Run.
func (s *SimulatedHealth) SetProbeError(id string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.probeErr, id)
		return
	}
	s.probeErr[id] = err
}

// Probe probes every watched instance now, as the interval does. It
// returns an error wrapping ErrNotRunning while Run is not running.
func (s *SimulatedHealth) Probe() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.report == nil {
		return fmt.Errorf("probe: %w", ErrNotRunning)
	}
	now := time.Now()
	for _, id := range s.tr.order {
		if c, ok := s.tr.probe(id, s.probeErr[id], now); ok {
			s.report(c)
		}
	}
	return nil
}
