package http

import (
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// metricsSummary is Nomad's JSON metrics summary (its api.MetricsSummary):
// the Prometheus registry's gauges as Gauges, counters as Counters and
// histograms and summaries as Samples, each named by its Prometheus name
// with its labels.
type metricsSummary struct {
	Timestamp string
	Gauges    []gaugeValue
	Points    []struct{}
	Counters  []sampledValue
	Samples   []sampledValue
}

type gaugeValue struct {
	Name   string
	Value  float32
	Labels map[string]string
}

// sampledValue is an aggregate: Count observations summing to Sum, their
// Mean, and for a counter Count 1 and Sum the counter's value. Min, Max,
// Rate and Stddev are 0: Prometheus keeps no such figures.
type sampledValue struct {
	Name   string
	Count  int
	Rate   float64
	Sum    float64
	Min    float64
	Max    float64
	Mean   float64
	Stddev float64
	Labels map[string]string
}

// wantsPrometheus reports whether the request asks for the Prometheus
// text format: ?format=prometheus, or an Accept header that names it or
// OpenMetrics (a scraper's).
func wantsPrometheus(r *http.Request) bool {
	if r.URL.Query().Get("format") == "prometheus" {
		return true
	}
	accept := r.Header.Get("Accept")
	return strings.Contains(accept, "application/openmetrics-text") || strings.Contains(accept, "text/plain")
}

// serveJSON answers the metrics summary.
func (m *httpMetrics) serveJSON(w http.ResponseWriter, r *http.Request) {
	if f := r.URL.Query().Get("format"); f != "" && f != "json" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid format parameter " + quote(f) + ": want prometheus or none (JSON)"})
		return
	}
	families, err := m.reg.Gather()
	if err != nil && len(families) == 0 {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "gather metrics: " + err.Error()})
		return
	}
	out := &metricsSummary{Timestamp: time.Now().UTC().Format("2006-01-02 15:04:05 -0700 MST"),
		Gauges: []gaugeValue{}, Points: []struct{}{}, Counters: []sampledValue{}, Samples: []sampledValue{}}
	for _, f := range families {
		name := f.GetName()
		for _, mt := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				out.Gauges = append(out.Gauges, gaugeValue{Name: name, Value: float32(finite(mt.GetGauge().GetValue())), Labels: labels})
			case dto.MetricType_UNTYPED:
				out.Gauges = append(out.Gauges, gaugeValue{Name: name, Value: float32(finite(mt.GetUntyped().GetValue())), Labels: labels})
			case dto.MetricType_COUNTER:
				v := finite(mt.GetCounter().GetValue())
				out.Counters = append(out.Counters, sampledValue{Name: name, Count: 1, Sum: v, Min: v, Max: v, Mean: v, Labels: labels})
			case dto.MetricType_HISTOGRAM:
				h := mt.GetHistogram()
				out.Samples = append(out.Samples, sample(name, h.GetSampleCount(), h.GetSampleSum(), labels))
			case dto.MetricType_SUMMARY:
				s := mt.GetSummary()
				out.Samples = append(out.Samples, sample(name, s.GetSampleCount(), s.GetSampleSum(), labels))
			}
		}
	}
	sort.SliceStable(out.Gauges, func(i, j int) bool { return out.Gauges[i].Name < out.Gauges[j].Name })
	writeJSON(w, http.StatusOK, out)
}

func sample(name string, count uint64, sum float64, labels map[string]string) sampledValue {
	s := sampledValue{Name: name, Count: int(min(count, math.MaxInt32)), Sum: finite(sum), Labels: labels}
	if count > 0 {
		s.Mean = s.Sum / float64(count)
	}
	return s
}

// finite maps NaN and infinities (which JSON cannot hold) to 0.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return "\"" + strings.ReplaceAll(s, "\"", "'") + "\""
}
