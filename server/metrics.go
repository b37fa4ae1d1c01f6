package server

import (
	"strconv"
	"strings"
	"sync"
	"time"

	armonmetrics "github.com/armon/go-metrics"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Metric names are prefixed "gpulayer_"; durations are in seconds, as the
// Prometheus naming guide asks (https://prometheus.io/docs/practices/naming/).

// schedulingBuckets are the histogram buckets for scheduling and Raft
// durations, in seconds: 0.5 ms to 10 s.
var schedulingBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// serverMetrics holds the server's event-driven metrics: counters and
// histograms updated where the work happens. Its observe methods accept a
// nil receiver, so a Server built without metrics (a test literal) still
// works. Gauges read at scrape time are in stateCollector.
type serverMetrics struct {
	raftApply     *prometheus.HistogramVec
	scheduling    *prometheus.HistogramVec
	placements    prometheus.Counter
	leaderChanges prometheus.Counter

	observerOnce sync.Once
}

// serverMetrics returns s's metrics (the Server.metrics field, created by
// NewServer).
func (s *Server) serverMetrics() *serverMetrics { return s.metrics }

func newServerMetrics() *serverMetrics {
	return &serverMetrics{
		raftApply: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gpulayer_raft_apply_duration_seconds",
			Help:    "Time from handing an entry to Raft on the leader until the FSM applied it, by message type.",
			Buckets: schedulingBuckets,
		}, []string{"type"}),
		scheduling: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gpulayer_scheduling_duration_seconds",
			Help:    "Time a scheduler worker spent on one evaluation, from dequeue to ack or nack (scheduling latency), by result (ok or error).",
			Buckets: schedulingBuckets,
		}, []string{"result"}),
		placements: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpulayer_placements_total",
			Help: "Allocations placed by plans this server's workers submitted and the leader committed.",
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpulayer_raft_leader_changes_total",
			Help: "Leader changes this server observed (including to no leader).",
		}),
	}
}

// observeApply records a Raft apply of type t that started at start.
func (m *serverMetrics) observeApply(t structs.MessageType, start time.Time) {
	if m == nil {
		return
	}
	m.raftApply.WithLabelValues(t.String()).Observe(time.Since(start).Seconds())
}

// observeEval records one evaluation's processing time and outcome.
func (m *serverMetrics) observeEval(d time.Duration, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.scheduling.WithLabelValues(result).Observe(d.Seconds())
}

// observePlan counts the placements a plan result committed.
func (m *serverMetrics) observePlan(r *structs.PlanResult) {
	if m == nil || r == nil {
		return
	}
	n := 0
	for _, allocs := range r.NodeAllocation {
		n += len(allocs)
	}
	m.placements.Add(float64(n))
}

// watchLeader counts leader changes seen by r until done closes. It
// registers a Raft observer once; later calls do nothing.
func (m *serverMetrics) watchLeader(r *raft.Raft, done <-chan struct{}) {
	if m == nil || r == nil {
		return
	}
	m.observerOnce.Do(func() {
		ch := make(chan raft.Observation, 16)
		obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
			_, ok := o.Data.(raft.LeaderObservation)
			return ok
		})
		r.RegisterObserver(obs)
		go func() {
			defer r.DeregisterObserver(obs)
			for {
				select {
				case <-done:
					return
				case <-ch:
					m.leaderChanges.Inc()
				}
			}
		}()
	})
}

// MetricsCollectors returns the server's Prometheus collectors: Raft apply,
// commit and FSM apply times, leader changes, scheduling latency,
// placements, and gauges read at each scrape (broker and plan queue depth,
// blocked evaluations, allocations by client status, nodes by status, jobs
// by status, Raft indexes and leadership). Register them on one registry
// per server; the Raft commit and FSM timings come from hashicorp/raft's
// process-wide go-metrics and are shared by every server in the process.
func (s *Server) MetricsCollectors() []prometheus.Collector {
	m := s.serverMetrics()
	m.watchLeader(s.raft, s.shutdownCtx.Done())
	return append([]prometheus.Collector{
		m.raftApply, m.scheduling, m.placements, m.leaderChanges,
		raftTimings(),
		&stateCollector{srv: s},
	},
		// Provisioning (metrics_provision.go).
		s.provisionCollectors()...)
}

// stateCollector reads gauges from the server at scrape time.
type stateCollector struct {
	srv *Server
}

var (
	descBroker = prometheus.NewDesc("gpulayer_broker_evals",
		"Evaluations in the eval broker by state (ready, unacked, pending, waiting for WaitUntil, delayed after a nack, failed).", []string{"state"}, nil)
	descBlocked = prometheus.NewDesc("gpulayer_blocked_evals",
		"Blocked evaluations waiting for capacity.", nil, nil)
	descPlanQueue = prometheus.NewDesc("gpulayer_plan_queue_depth",
		"Plans waiting for the leader's plan applier.", nil, nil)
	descAllocs = prometheus.NewDesc("gpulayer_allocations",
		"Allocations in the state store by client status.", []string{"client_status"}, nil)
	descNodes = prometheus.NewDesc("gpulayer_nodes",
		"Nodes in the state store by status.", []string{"status"}, nil)
	descJobs = prometheus.NewDesc("gpulayer_jobs",
		"Jobs in the state store by status.", []string{"status"}, nil)
	descLeader = prometheus.NewDesc("gpulayer_raft_is_leader",
		"1 when this server is the Raft leader, else 0.", nil, nil)
	descIndex = prometheus.NewDesc("gpulayer_raft_index",
		"Raft indexes of this server (last_log, commit, applied).", []string{"kind"}, nil)
)

// Describe sends the descriptions of every gauge.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBroker, descBlocked, descPlanQueue, descAllocs, descNodes, descJobs, descLeader, descIndex} {
		ch <- d
	}
}

// Collect reads the broker, plan queue and a state snapshot. A state read
// error is reported as an invalid metric, which fails the scrape loudly.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.srv
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	b := s.broker.Stats()
	gauge(descBroker, float64(b.TotalReady), "ready")
	gauge(descBroker, float64(b.TotalUnacked), "unacked")
	gauge(descBroker, float64(b.TotalPending), "pending")
	gauge(descBroker, float64(b.TotalWaiting), "waiting")
	gauge(descBroker, float64(b.TotalDelayed), "delayed")
	gauge(descBroker, float64(b.TotalFailed), "failed")
	gauge(descBlocked, float64(s.blocked.Stats().TotalBlocked))
	gauge(descPlanQueue, float64(s.planQueue.Depth()))
	leader := 0.0
	if s.IsLeader() {
		leader = 1
	}
	gauge(descLeader, leader)
	st := s.raft.Stats()
	for _, k := range []string{"last_log_index", "commit_index", "applied_index"} {
		if v, err := strconv.ParseFloat(st[k], 64); err == nil {
			gauge(descIndex, v, k)
		}
	}

	snap, err := s.State().Snapshot()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descAllocs, err)
		return
	}
	allocs, err := snap.Allocs(nil)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descAllocs, err)
		return
	}
	byStatus := map[string]int{
		structs.AllocClientStatusPending: 0, structs.AllocClientStatusRunning: 0, structs.AllocClientStatusComplete: 0,
		structs.AllocClientStatusFailed: 0, structs.AllocClientStatusLost: 0,
	}
	for _, a := range allocs {
		byStatus[a.ClientStatus]++
	}
	for k, v := range byStatus {
		gauge(descAllocs, float64(v), k)
	}
	nodes, err := snap.Nodes(nil)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descNodes, err)
		return
	}
	nodeStatus := map[string]int{structs.NodeStatusInit: 0, structs.NodeStatusReady: 0, structs.NodeStatusDown: 0}
	for _, n := range nodes {
		nodeStatus[n.Status]++
	}
	for k, v := range nodeStatus {
		gauge(descNodes, float64(v), k)
	}
	jobs, err := snap.Jobs(nil)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descJobs, err)
		return
	}
	jobStatus := map[string]int{}
	for _, j := range jobs {
		jobStatus[j.Status]++
	}
	for k, v := range jobStatus {
		gauge(descJobs, float64(v), k)
	}
}

// raftSink receives hashicorp/raft's go-metrics samples (through
// go-metrics/compat, which forwards to armon/go-metrics by default) and
// keeps the ones GPUlayer exports. It implements armonmetrics.MetricSink.
type raftSink struct {
	commit   prometheus.Histogram
	fsmApply prometheus.Histogram
}

var (
	raftSinkOnce sync.Once
	raftSinkInst *raftSink
)

// raftTimings installs the process-wide go-metrics sink on first use and
// returns it as a collector of Raft commit and FSM apply times.
func raftTimings() prometheus.Collector {
	raftSinkOnce.Do(func() {
		raftSinkInst = &raftSink{
			commit: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "gpulayer_raft_commit_duration_seconds",
				Help:    "Time from a leader dispatching a log entry until a quorum committed it (raft.commitTime), for every server in this process.",
				Buckets: schedulingBuckets,
			}),
			fsmApply: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "gpulayer_raft_fsm_apply_duration_seconds",
				Help:    "Time the FSM took to apply one log entry (raft.fsm.apply), for every server in this process.",
				Buckets: schedulingBuckets,
			}),
		}
		conf := armonmetrics.DefaultConfig("")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false
		conf.EnableServiceLabel = false
		conf.EnableTypePrefix = false
		// NewGlobal fails only for a bad sink URL, which a sink value
		// cannot have.
		_, _ = armonmetrics.NewGlobal(conf, raftSinkInst)
	})
	return raftSinkInst
}

// Describe and Collect make the sink a collector of its two histograms.
func (r *raftSink) Describe(ch chan<- *prometheus.Desc) {
	r.commit.Describe(ch)
	r.fsmApply.Describe(ch)
}

// Collect sends both histograms.
func (r *raftSink) Collect(ch chan<- prometheus.Metric) {
	r.commit.Collect(ch)
	r.fsmApply.Collect(ch)
}

// AddSample takes raft's timing samples, which go-metrics reports in
// milliseconds.
func (r *raftSink) AddSample(key []string, val float32) {
	switch keyString(key) {
	case "raft.commitTime":
		r.commit.Observe(float64(val) / 1000)
	case "raft.fsm.apply":
		r.fsmApply.Observe(float64(val) / 1000)
	}
}

// AddSampleWithLabels forwards to AddSample, ignoring labels.
func (r *raftSink) AddSampleWithLabels(key []string, val float32, _ []armonmetrics.Label) {
	r.AddSample(key, val)
}

// SetGauge, SetGaugeWithLabels, EmitKey, IncrCounter and
// IncrCounterWithLabels ignore the rest of raft's metrics.
func (r *raftSink) SetGauge([]string, float32)                                    {}
func (r *raftSink) SetGaugeWithLabels([]string, float32, []armonmetrics.Label)    {}
func (r *raftSink) EmitKey([]string, float32)                                     {}
func (r *raftSink) IncrCounter([]string, float32)                                 {}
func (r *raftSink) IncrCounterWithLabels([]string, float32, []armonmetrics.Label) {}

func keyString(key []string) string { return strings.Join(key, ".") }
