package server

import (
	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/prometheus/client_golang/prometheus"
)

// Provisioning gauges, read from the state at scrape time.
var (
	descProvisionRequests = prometheus.NewDesc("gpulayer_provision_requests",
		"Provision requests in the state store by pool, op (create, terminate) and status (pending, failed, complete, canceled).", []string{"pool", "op", "status"}, nil)
	descPoolNodes = prometheus.NewDesc("gpulayer_node_pool_nodes",
		"Nodes of each pool with a scaling policy by state (idle, busy, draining, down, joining).", []string{"pool", "state"}, nil)
	descPoolHosts = prometheus.NewDesc("gpulayer_node_pool_hosts",
		"Provisioned hosts of each pool with a scaling policy (its size).", []string{"pool"}, nil)
)

// provisionCollector reports the provisioning gauges.
type provisionCollector struct {
	srv *Server
}

// Describe sends the gauges' descriptions.
func (c *provisionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descProvisionRequests, descPoolNodes, descPoolHosts} {
		ch <- d
	}
}

// Collect reads the provision requests and each scaled pool's status.
func (c *provisionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.fsm.State()
	reqs, err := st.ProvisionRequests(nil)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descProvisionRequests, err)
		return
	}
	type key struct{ pool, op, status string }
	counts := map[key]int{}
	for _, r := range reqs {
		counts[key{r.Pool, r.Op, r.Status}]++
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(descProvisionRequests, prometheus.GaugeValue, float64(v), k.pool, k.op, k.status)
	}
	pools, err := st.NodePools(nil)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descPoolNodes, err)
		return
	}
	for _, p := range pools {
		if p.Scaling == nil {
			continue
		}
		ps, err := provision.BuildPoolStatus(st, p)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descPoolNodes, err)
			return
		}
		byState := map[string]int{structs.PoolNodeIdle: 0, structs.PoolNodeBusy: 0, structs.PoolNodeDraining: 0,
			structs.PoolNodeDown: 0, structs.PoolNodeJoining: 0}
		for _, n := range ps.Nodes {
			byState[n.State]++
		}
		for s, v := range byState {
			ch <- prometheus.MustNewConstMetric(descPoolNodes, prometheus.GaugeValue, float64(v), p.Name, s)
		}
		ch <- prometheus.MustNewConstMetric(descPoolHosts, prometheus.GaugeValue, float64(ps.Hosts), p.Name)
	}
}

// provisionCollectors returns the provisioning series: the provisioner's
// counters and the gauges above.
func (s *Server) provisionCollectors() []prometheus.Collector {
	return append(s.provisionMetrics.Collectors(), &provisionCollector{srv: s})
}
