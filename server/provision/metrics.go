package provision

import "github.com/prometheus/client_golang/prometheus"

// Metrics holds the provisioner's event counters. Its methods accept a
// nil receiver (no metrics).
type Metrics struct {
	calls    *prometheus.CounterVec
	failures *prometheus.CounterVec
	stales   prometheus.Counter
}

// NewMetrics returns the provisioner's counters, unregistered (see
// Collectors).
func NewMetrics() *Metrics {
	return &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpulayer_provision_provider_calls_total",
			Help: "Provider calls the provisioner made, by pool and op (create, terminate, list).",
		}, []string{"pool", "op"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpulayer_provision_provider_failures_total",
			Help: "Provider calls that failed (error or deadline), by pool and op.",
		}, []string{"pool", "op"}),
		stales: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpulayer_provision_stale_results_total",
			Help: "Provider answers dropped because their request changed since the call started (compare-and-set on its Raft index).",
		}),
	}
}

// Collectors returns the counters to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.calls, m.failures, m.stales}
}

func (m *Metrics) call(pool, op string, err error) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(pool, op).Inc()
	if err != nil {
		m.failures.WithLabelValues(pool, op).Inc()
	}
}

func (m *Metrics) stale() {
	if m == nil {
		return
	}
	m.stales.Inc()
}
