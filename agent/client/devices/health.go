package devices

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DefaultHealthInterval is how often a health source probes its devices
// (and re-probes unhealthy ones) when no interval is configured: every 30
// seconds.
const DefaultHealthInterval = 30 * time.Second

// HealthyDescription is the HealthDescription of a healthy instance.
const HealthyDescription = "healthy"

// ErrNotRunning is returned by SimulatedHealth's fault injection while
// its Run is not running.
var ErrNotRunning = errors.New("health source not running")

// DeviceHealth is a change of one device instance's health.
type DeviceHealth struct {
	// ID is the instance ID: an NVIDIA "GPU-…" or "MIG-…" UUID, or a
	// simulated ID.
	ID      string
	Healthy bool
	// Description is HealthyDescription, or "unhealthy: <reason> at <time>"
	// with the time in RFC 3339 UTC, e.g. "unhealthy: XID 79 (GPU has
	// fallen off the bus) at 2026-12-01T02:10:00Z".
	Description string
	// Since is when the instance entered this state.
	Since time.Time
}

// HealthSource watches the health of device instances. NVML (nvml_health.go)
// and SimulatedHealth implement it; the client cannot tell which it has.
type HealthSource interface {
	// Run watches the instances ids until ctx is done and returns then.
	// Every instance starts healthy; report is called with each change of
	// an instance's health or reason, never concurrently, and never after
	// Run returns. report must not block for long. A source that cannot
	// work (no driver library) logs why and returns at once.
	Run(ctx context.Context, ids []string, report func(DeviceHealth))
}

// NVMLHealthConfig configures the NVML health source (NewNVMLHealth).
type NVMLHealthConfig struct {
	// Interval is how often every device is probed, and so how often an
	// unhealthy one is re-probed; default DefaultHealthInterval.
	Interval time.Duration
	// Logger defaults to a null logger.
	Logger hclog.Logger
}

// withDefaults returns cfg with its zero fields defaulted.
func (cfg NVMLHealthConfig) withDefaults() NVMLHealthConfig {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultHealthInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return cfg
}

// xidMeanings names well-known XIDs. Source: NVIDIA's "XID Errors" guide
// and its Xid catalog, https://docs.nvidia.com/deploy/xid-errors/.
var xidMeanings = map[uint64]string{
	13:  "graphics engine exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "preemptive cleanup, due to previous errors",
	48:  "double-bit ECC error",
	61:  "internal micro-controller breakpoint/warning",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping recording event",
	64:  "ECC page retirement or row remapper recording failure",
	68:  "video processor exception",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	109: "context switch timeout error",
	119: "GSP RPC timeout",
	120: "GSP error",
}

// applicationXIDs are the XIDs an application's own fault raises (a bad
// kernel, a page fault, a killed context); the GPU stays usable for the
// next job. They are the XIDs NVIDIA's Kubernetes device plugin ignores
// for health (k8s-device-plugin, internal/rm/health.go, ignoredXids:
// 13, 31, 43, 45, 68, 109).
var applicationXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}

// IsApplicationXID reports whether xid is caused by an application and so
// does not make a GPU unhealthy (see applicationXIDs).
func IsApplicationXID(xid uint64) bool { return applicationXIDs[xid] }

// XIDReason returns "XID <n> (<meaning>)" for a well-known XID and
// "XID <n>" otherwise.
func XIDReason(xid uint64) string {
	if m, ok := xidMeanings[xid]; ok {
		return fmt.Sprintf("XID %d (%s)", xid, m)
	}
	return fmt.Sprintf("XID %d", xid)
}

// UnhealthyDescription returns "unhealthy: <reason> at <at in RFC 3339
// UTC>".
func UnhealthyDescription(reason string, at time.Time) string {
	return fmt.Sprintf("unhealthy: %s at %s", reason, at.UTC().Format(time.RFC3339))
}

// healthTracker applies the health rules shared by every HealthSource to
// a fixed set of instances. It is not safe for concurrent use.
//
// The rules: a critical fault (an XID other than an application one, a
// double-bit ECC error) marks an instance unhealthy at once. A probe
// (a query of the device) that fails marks it unhealthy with the probe's
// error. An unhealthy instance returns to healthy only at a successful
// probe with no critical fault since the probe before it, so it has to
// stay quiet for a whole probe interval: a GPU that keeps raising XIDs
// stays out.
type healthTracker struct {
	order []string
	devs  map[string]*trackedDevice
}

type trackedDevice struct {
	healthy bool
	reason  string
	since   time.Time
	// faultSinceProbe is set by a critical fault and cleared by every
	// probe.
	faultSinceProbe bool
}

func newHealthTracker(ids []string) *healthTracker {
	t := &healthTracker{devs: make(map[string]*trackedDevice, len(ids))}
	for _, id := range ids {
		if _, dup := t.devs[id]; dup || id == "" {
			continue
		}
		t.order = append(t.order, id)
		t.devs[id] = &trackedDevice{healthy: true}
	}
	return t
}

// has reports whether id is tracked.
func (t *healthTracker) has(id string) bool { return t.devs[id] != nil }

// fault records a critical fault with reason on the instance id (every
// instance when id is empty) at at, and returns the changes to report.
func (t *healthTracker) fault(id, reason string, at time.Time) []DeviceHealth {
	var out []DeviceHealth
	for _, one := range t.pick(id) {
		d := t.devs[one]
		d.faultSinceProbe = true
		if c, ok := t.setUnhealthy(one, d, reason, at); ok {
			out = append(out, c)
		}
	}
	return out
}

// probe records the outcome of probing id at at (err nil: the device
// answered) and returns the change to report, if any.
func (t *healthTracker) probe(id string, err error, at time.Time) (DeviceHealth, bool) {
	d := t.devs[id]
	if d == nil {
		return DeviceHealth{}, false
	}
	quiet := !d.faultSinceProbe
	d.faultSinceProbe = false
	if err != nil {
		return t.setUnhealthy(id, d, err.Error(), at)
	}
	if d.healthy || !quiet {
		return DeviceHealth{}, false
	}
	d.healthy, d.reason, d.since = true, "", at
	return DeviceHealth{ID: id, Healthy: true, Description: HealthyDescription, Since: at}, true
}

// setUnhealthy marks d unhealthy for reason. An instance already unhealthy
// for the same reason keeps its first time and is not reported again.
func (t *healthTracker) setUnhealthy(id string, d *trackedDevice, reason string, at time.Time) (DeviceHealth, bool) {
	if !d.healthy && d.reason == reason {
		return DeviceHealth{}, false
	}
	d.healthy, d.reason, d.since = false, reason, at
	return DeviceHealth{ID: id, Healthy: false, Description: UnhealthyDescription(reason, at), Since: at}, true
}

// pick returns [id] when tracked, every instance for "", else nil.
func (t *healthTracker) pick(id string) []string {
	if id == "" {
		return t.order
	}
	if t.devs[id] == nil {
		return nil
	}
	return []string{id}
}
