package http

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsCollector is implemented by a server that exports Prometheus
// metrics (*server.Server).
type metricsCollector interface {
	MetricsCollectors() []prometheus.Collector
}

// httpMetrics is the agent's Prometheus registry and its HTTP request
// histogram. Each handler has its own registry, so several agents in one
// process (tests) do not collide.
type httpMetrics struct {
	reg      *prometheus.Registry
	requests *prometheus.HistogramVec
}

// newHTTPMetrics builds the registry: Go runtime and process collectors,
// HTTP request durations by route pattern, method and status code, the
// server's collectors when srv has them, and GPU telemetry when client
// samples its GPUs. It returns an error when two collectors clash, a
// programming error.
func newHTTPMetrics(srv Server, client Client) (*httpMetrics, error) {
	m := &httpMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gpulayer_http_request_duration_seconds",
			Help:    "HTTP API request durations by route pattern, method and status code (streams count until they end).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30},
		}, []string{"route", "method", "code"}),
	}
	cs := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests,
	}
	if mc, ok := srv.(metricsCollector); ok && srv != nil {
		cs = append(cs, mc.MetricsCollectors()...)
	}
	if ds, ok := client.(deviceStatser); ok && client != nil {
		cs = append(cs, &gpuCollector{src: ds})
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe records one request; pattern is the ServeMux pattern that
// routed it ("" for unrouted requests, recorded as "unmatched").
func (m *httpMetrics) observe(pattern, method string, code int, d time.Duration) {
	if m == nil {
		return
	}
	if pattern == "" {
		pattern = "unmatched"
	}
	m.requests.WithLabelValues(pattern, method, strconv.Itoa(code)).Observe(d.Seconds())
}

// handler serves GET /v1/metrics: with ?format=prometheus, or an Accept
// header naming the Prometheus text or OpenMetrics format (what a
// Prometheus scraper sends), the Prometheus text format (OpenMetrics when
// the scraper asks for it); otherwise the JSON summary Nomad's API
// answers (metrics_json.go).
func (m *httpMetrics) handler() http.Handler {
	prom := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wantsPrometheus(r) {
			prom.ServeHTTP(w, r)
			return
		}
		m.serveJSON(w, r)
	})
}

// gpuCollector exports the local client's latest GPU sample.
type gpuCollector struct {
	src deviceStatser
}

var (
	labelsGPU   = []string{"node_id", "device", "model", "simulated", "alloc_id"}
	descGPUUtil = prometheus.NewDesc("gpulayer_gpu_utilization_percent",
		"GPU utilisation in percent over the client's last sample period (NVML utilization.gpu; simulated devices report a generated pattern).", labelsGPU, nil)
	descGPUMemUsed = prometheus.NewDesc("gpulayer_gpu_memory_used_mib",
		"GPU memory in use, MiB.", labelsGPU, nil)
	descGPUMemTotal = prometheus.NewDesc("gpulayer_gpu_memory_total_mib",
		"GPU memory in total, MiB.", labelsGPU, nil)
	descGPUHealthy = prometheus.NewDesc("gpulayer_gpu_healthy",
		"1 when the GPU instance is healthy, else 0.", labelsGPU, nil)
)

// Describe sends the GPU metric descriptions.
func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descGPUUtil
	ch <- descGPUMemUsed
	ch <- descGPUMemTotal
	ch <- descGPUHealthy
}

// Collect sends one series per device of the latest sample; devices whose
// last reading failed send only their health and total memory.
func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.DeviceStats()
	if st == nil || st.SampledAt == 0 {
		return
	}
	for _, d := range st.Devices {
		labels := []string{st.NodeID, d.ID, d.Name, strconv.FormatBool(d.Simulated), d.AllocID}
		healthy := 0.0
		if d.Healthy {
			healthy = 1
		}
		ch <- prometheus.MustNewConstMetric(descGPUHealthy, prometheus.GaugeValue, healthy, labels...)
		ch <- prometheus.MustNewConstMetric(descGPUMemTotal, prometheus.GaugeValue, float64(d.MemoryTotalMiB), labels...)
		if d.Error != "" {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descGPUUtil, prometheus.GaugeValue, d.UtilizationPercent, labels...)
		ch <- prometheus.MustNewConstMetric(descGPUMemUsed, prometheus.GaugeValue, float64(d.MemoryUsedMiB), labels...)
	}
}

// observabilityRoutes registers /v1/metrics, /v1/event/stream,
// /v1/client/stats and the Web UI (ui.go). It fails only when the metrics
// registry or the UI templates cannot be built, a programming error.
func (h *handler) observabilityRoutes() error {
	m, err := newHTTPMetrics(h.srv, h.client)
	if err != nil {
		return fmt.Errorf("http: metrics: %w", err)
	}
	h.metrics = m
	h.mux.Handle("GET /v1/metrics", m.handler())
	h.mux.HandleFunc("GET /v1/event/stream", h.eventStream)
	h.handle("GET /v1/client/stats", h.clientStats)
	return h.uiRoutes()
}
