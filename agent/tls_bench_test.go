package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/agent/tlsutil"
	"github.com/gpulayer/gpulayer/agent/tlsutil/tlsutiltest"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
)

// BenchmarkPutToRunningTLS measures PUT /v1/jobs to the task's start
// (TaskState.StartedAt) for examples/hello-gpu.hcl on an in-process
// production-mode agent (server and client, Raft over TCP, two simulated
// GPUs) in three setups: "off" (no TLS, ACLs off), "on" (tls { http =
// true, rpc = true } and mTLS callers, ACLs off) and "acl" (the same TLS
// with ACLs on, bootstrapped, every request carrying the management
// token). Each PUT opens a new connection, as a CLI invocation does, so
// the TLS handshake is in the figure; the polling reuses its connection.
// It reports the median of 20 submissions of each as "ms/median-off",
// "ms/median-on" and "ms/median-acl", and the ratios "on/off" and
// "acl/off" (issue 10's "with ACLs and TLS on, as a ratio to off").
func BenchmarkPutToRunningTLS(b *testing.B) {
	pki, err := tlsutiltest.WriteTestPKI(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	job, err := jobspec.ParseFile(filepath.Join(repoRoot(b), "examples", "hello-gpu.hcl"), nil)
	if err != nil {
		b.Fatal(err)
	}
	type setup struct {
		addr      string
		put, poll *http.Client
		token     string
	}
	start := func(withTLS, withACL bool) setup {
		cfg := agent.DefaultConfig()
		cfg.Name = fmt.Sprintf("bench-tls-%v-acl-%v", withTLS, withACL)
		cfg.DataDir = taskUserDir(b)
		cfg.ACL = &agent.ACLConfig{Enabled: &withACL}
		cfg.BindAddr = "127.0.0.1"
		cfg.LogLevel = "ERROR"
		cfg.Ports.HTTP, cfg.Ports.Raft, cfg.Ports.Serf = freePort(b), freePort(b), freePort(b)
		cfg.Server.Enabled, cfg.Client.Enabled = true, true
		gpus := 2
		cfg.Client.DevGPUs = &gpus
		s := setup{put: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, poll: &http.Client{}}
		scheme := "http"
		if withTLS {
			cf, kf, err := pki.Cert(cfg.Name, tlsutil.CertOptions{Role: tlsutil.RoleServer})
			if err != nil {
				b.Fatal(err)
			}
			cfg.TLS = &tlsutil.Config{HTTP: true, RPC: true, CAFile: pki.CAFile, CertFile: cf, KeyFile: kf}
			s.put = httpsClient(b, pki, tlsutil.RoleCLI)
			s.put.Timeout = 0
			s.put.Transport.(*http.Transport).DisableKeepAlives = true
			s.poll = httpsClient(b, pki, tlsutil.RoleCLI)
			s.poll.Timeout = 0
			scheme = "https"
		}
		a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard}))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = a.Shutdown() })
		s.addr = scheme + "://" + a.HTTPAddr()
		if withACL {
			s.token = benchBootstrap(b, s.poll, s.addr)
			s.poll.Transport = benchToken{base: s.poll.Transport, token: s.token}
		}
		return s
	}
	off, on, acl := start(false, false), start(true, false), start(true, true)
	const runs = 20
	median := func(i int, name string, s setup) float64 {
		var lat []time.Duration
		for r := 0; r < runs; r++ {
			job.ID = fmt.Sprintf("bench-%s-%d-%d", name, i, r)
			job.Name = job.ID
			body, _ := json.Marshal(map[string]interface{}{"Job": job})
			req, _ := http.NewRequest(http.MethodPut, s.addr+"/v1/jobs", bytes.NewReader(body))
			if s.token != "" {
				req.Header.Set("X-Nomad-Token", s.token)
			}
			sent := time.Now()
			resp, err := s.put.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("PUT /v1/jobs (%s): %s", name, resp.Status)
			}
			lat = append(lat, time.Unix(0, waitStartedWith(b, s.poll, s.addr, job.ID)).Sub(sent))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return float64(lat[runs/2]) / float64(time.Millisecond)
	}
	b.ResetTimer()
	var offs, ons, acls []float64
	for i := 0; i < b.N; i++ {
		// Interleaved, so machine noise falls on all three alike.
		offs = append(offs, median(i, "off", off))
		ons = append(ons, median(i, "on", on))
		acls = append(acls, median(i, "acl", acl))
	}
	b.StopTimer()
	sort.Float64s(offs)
	sort.Float64s(ons)
	sort.Float64s(acls)
	mOff, mOn, mACL := offs[len(offs)/2], ons[len(ons)/2], acls[len(acls)/2]
	b.ReportMetric(mOff, "ms/median-off")
	b.ReportMetric(mOn, "ms/median-on")
	b.ReportMetric(mACL, "ms/median-acl")
	b.ReportMetric(mOn/mOff, "on/off")
	b.ReportMetric(mACL/mOff, "acl/off")
}

// benchBootstrap bootstraps the ACLs of the agent at addr (retrying while
// it elects itself) and returns the management token's secret.
func benchBootstrap(b *testing.B, hc *http.Client, addr string) string {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := hc.Post(addr+"/v1/acl/bootstrap", "application/json", nil)
		if err != nil {
			b.Fatal(err)
		}
		var tok struct{ SecretID string }
		err = json.NewDecoder(resp.Body).Decode(&tok)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && err == nil && tok.SecretID != "" {
			return tok.SecretID
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("ACL bootstrap did not succeed within 30s")
	return ""
}

// benchToken adds an ACL token to every request.
type benchToken struct {
	base  http.RoundTripper
	token string
}

func (t benchToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Nomad-Token", t.token)
	if t.base == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	return t.base.RoundTrip(r)
}

// waitStartedWith is waitStarted with a given HTTP client (for HTTPS or
// one that adds a token).
func waitStartedWith(b *testing.B, hc *http.Client, addr, jobID string) int64 {
	b.Helper()
	var index uint64
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := hc.Get(fmt.Sprintf("%s/v1/job/%s/allocations?index=%d&wait=5s", addr, jobID, index))
		if err != nil {
			b.Fatal(err)
		}
		var allocs []*api.Allocation
		err = json.NewDecoder(resp.Body).Decode(&allocs)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		fmt.Sscan(resp.Header.Get("X-Gpulayer-Index"), &index)
		for _, al := range allocs {
			for _, ts := range al.TaskStates {
				if !ts.StartedAt.IsZero() && al.ClientTerminalStatus() {
					return ts.StartedAt.UnixNano()
				}
			}
		}
	}
	b.Fatalf("job %s never started", jobID)
	return 0
}
