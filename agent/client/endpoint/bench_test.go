package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/internal/porttest"
	"github.com/gpulayer/gpulayer/structs"
)

// benchCompletion is what the benchmark's members answer: an OpenAI
// completion of a realistic small size.
const benchCompletion = `{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"llama-3-8b",` +
	`"choices":[{"index":0,"text":" a small answer from the member","finish_reason":"stop","logprobs":null}],` +
	`"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`

// BenchmarkRouterAddedLatency measures the latency the router adds over a
// direct call, side by side with nginx (Debian package nginx) doing round
// robin with kept-alive upstream connections over the same three members,
// in one run: an open-loop load generator sends GETs at a fixed rate per
// target (default 1,000 requests/s, 10,000 requests each; env
// ENDPOINT_BENCH_RATE and ENDPOINT_BENCH_REQUESTS), the three targets
// interleaved (direct to member 0, through the router, through nginx), and
// each request's latency is timed from its send to its last body byte.
// The members (one process), the router and nginx each run in a process of
// their own (ENDPOINT_BENCH_PROCS=shared: members and router in the
// benchmark's), and the CPU time router and nginx used per request is
// reported beside the latencies: on a shared machine it moves less than
// the latencies do.
// It reports p50 and p99 per target, the added latency (target - direct)
// and the ratio router-added / nginx-added (below 1: the router adds less).
// Without nginx installed it says so and measures direct and router only.
func BenchmarkRouterAddedLatency(b *testing.B) {
	rate := envInt(b, "ENDPOINT_BENCH_RATE", 1000)
	count := envInt(b, "ENDPOINT_BENCH_REQUESTS", 10000)

	// By default members and router run in processes of their own, apart
	// from the load generator, as in production (the router runs in the
	// client agent); ENDPOINT_BENCH_PROCS=shared runs them in this
	// process, beside the load generator, which spares the router the
	// cross-process wake-ups nginx pays (it favours the router).
	var addrs []string
	var routerAddr, layout string
	routerPID := 0 // known when the router has a process of its own
	switch v := os.Getenv("ENDPOINT_BENCH_PROCS"); v {
	case "", "separate":
		list, _ := spawnBenchChild(b, "members", "")
		addrs = strings.Split(list, ",")
		routerAddr, routerPID = spawnBenchChild(b, "router", list)
		layout = "members and router each in a process of their own"
	case "shared":
		var stop func()
		var err error
		if addrs, stop, err = startBenchMembers(3); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(stop)
		r, err := startBenchRouter(addrs)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = r.Close() })
		routerAddr = r.Addr()
		layout = "members and router in the load generator's process"
	default:
		b.Fatalf("ENDPOINT_BENCH_PROCS=%q: want shared or separate", v)
	}

	targets := []*benchTarget{
		{name: "direct", url: "http://" + addrs[0] + "/v1/completions"},
		{name: "router", url: "http://" + routerAddr + "/v1/completions"},
	}
	nginxAddr, nginxPID, ok := startNginx(b, addrs)
	if ok {
		targets = append(targets, &benchTarget{name: "nginx", url: "http://" + nginxAddr + "/v1/completions"})
	}
	for _, t := range targets {
		t.client = &http.Client{
			// At most 256 connections per target: when the shared
			// machine stalls, requests wait (and their latency shows
			// it) instead of opening thousands of connections.
			Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256, DisableCompression: true},
			Timeout:   30 * time.Second,
		}
		b.Cleanup(t.client.CloseIdleConnections)
	}

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = runLoad(targets, rate/5, count/10) // warm-up: connections, caches
		for _, t := range targets {
			t.lat, t.errs = t.lat[:0], 0
		}
		load0 := loadAvg()
		rcpu0, ncpu0 := procCPU(routerPID), procCPU(nginxPID)
		sent := runLoad(targets, rate, count)
		// CPU per proxied request, where the proxy has a process of its
		// own: a figure the machine's load hardly changes.
		if rcpu1 := procCPU(routerPID); rcpu0 >= 0 && rcpu1 >= 0 {
			b.Logf("router CPU %s per request (%s for %d)", (rcpu1-rcpu0)/time.Duration(count), rcpu1-rcpu0, count)
			b.ReportMetric(us((rcpu1-rcpu0)/time.Duration(count)), "router-cpu-µs/req")
		}
		if ncpu1 := procCPU(nginxPID); ncpu0 >= 0 && ncpu1 >= 0 {
			b.Logf("nginx CPU %s per request (%s for %d)", (ncpu1-ncpu0)/time.Duration(count), ncpu1-ncpu0, count)
			b.ReportMetric(us((ncpu1-ncpu0)/time.Duration(count)), "nginx-cpu-µs/req")
		}
		b.Logf("sent %d requests per target in %s (%.0f/s per target, scheduled %d/s); load average %s before, %s after",
			count, sent.Round(time.Millisecond), float64(count)/sent.Seconds(), rate, load0, loadAvg())
	}
	b.StopTimer()

	direct := targets[0]
	for _, t := range targets {
		if t.errs > 0 {
			b.Errorf("%s: %d of %d requests failed, first: %v", t.name, t.errs, count, t.first)
		}
		slices.Sort(t.lat)
	}
	routerProcs := runtime.GOMAXPROCS(0)
	if n, err := strconv.Atoi(os.Getenv("ENDPOINT_BENCH_ROUTER_GOMAXPROCS")); err == nil && n > 0 && routerPID > 0 {
		routerProcs = n
	}
	b.Logf("%d GETs per target at %d/s each, targets interleaved, 3 Go net/http members, %s, nginx in its own (one worker); router GOMAXPROCS=%d (ENDPOINT_BENCH_ROUTER_GOMAXPROCS), load generator GOMAXPROCS=%d, %d CPUs",
		count, rate, layout, routerProcs, runtime.GOMAXPROCS(0), runtime.NumCPU())
	for _, t := range targets {
		p50, p99 := pct(t.lat, 50), pct(t.lat, 99)
		line := fmt.Sprintf("%-7s p50 %8s  p99 %8s  p99.9 %8s", t.name, p50, p99, pct(t.lat, 99.9))
		if t != direct {
			line += fmt.Sprintf("   added p50 %8s  p99 %8s", p50-pct(direct.lat, 50), p99-pct(direct.lat, 99))
		}
		b.Log(line)
		b.ReportMetric(us(p50), t.name+"-p50-µs")
		b.ReportMetric(us(p99), t.name+"-p99-µs")
	}
	if len(targets) == 3 {
		for _, p := range []float64{50, 99} {
			ra := pct(targets[1].lat, p) - pct(direct.lat, p)
			na := pct(targets[2].lat, p) - pct(direct.lat, p)
			ratio := "n/a (nginx added nothing)"
			if na > 0 {
				ratio = fmt.Sprintf("%.2f", float64(ra)/float64(na))
				b.ReportMetric(float64(ra)/float64(na), fmt.Sprintf("router/nginx-added-p%v", p))
			}
			b.Logf("p%v added: router %s, nginx %s, router/nginx %s", p, ra, na, ratio)
		}
	}
}

// benchTarget is one URL measured, with its samples.
type benchTarget struct {
	name   string
	url    string
	client *http.Client
	mu     sync.Mutex
	lat    []time.Duration
	errs   int
	first  error // the first failure
}

// runLoad sends count requests to each target at rate per second per
// target, open loop (each request in its own goroutine, sent at its
// scheduled time whatever the earlier ones do), the targets taking turns.
// It returns how long sending took (the schedule says count/rate).
func runLoad(targets []*benchTarget, rate, count int) time.Duration {
	if rate < 1 {
		rate = 1
	}
	step := time.Second / time.Duration(rate*len(targets))
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < count*len(targets); i++ {
		if d := time.Until(start.Add(time.Duration(i) * step)); d > 0 {
			time.Sleep(d)
		}
		// Rotate which target goes first in each round.
		round := i / len(targets)
		t := targets[(i+round)%len(targets)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			err := benchGet(t.client, t.url)
			d := time.Since(t0)
			t.mu.Lock()
			if err != nil {
				if t.errs == 0 {
					t.first = err
				}
				t.errs++
			} else {
				t.lat = append(t.lat, d)
			}
			t.mu.Unlock()
		}()
	}
	sent := time.Since(start)
	wg.Wait()
	return sent
}

// loadAvg returns the 1-minute load average, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func benchGet(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || n != int64(len(benchCompletion)) {
		return fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return nil
}

// pct returns the p-th percentile of sorted (nearest rank).
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// startBenchMembers serves n OpenAI-shaped members on 127.0.0.1 and
// returns their addresses and a function that stops them.
func startBenchMembers(n int) ([]string, func(), error) {
	listing := `{"object":"list","data":[{"id":"` + testModel + `","object":"model"}]}`
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, listing)
	})
	mux.HandleFunc("/v1/completions", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(benchCompletion)))
		_, _ = io.WriteString(w, benchCompletion)
	})
	var addrs []string
	var srvs []*http.Server
	stop := func() {
		for _, s := range srvs {
			_ = s.Close()
		}
	}
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, err
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		srvs = append(srvs, srv)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, stop, nil
}

// startBenchRouter starts a router over the members at addrs and waits
// for their admission.
func startBenchRouter(addrs []string) (*Router, error) {
	r, err := New(Config{
		Endpoint:   &structs.Endpoint{Name: "bench", Model: testModel},
		ListenAddr: "127.0.0.1:0",
		Logger:     hclog.NewNullLogger(),
	})
	if err != nil {
		return nil, err
	}
	if err := r.Start(context.Background()); err != nil {
		return nil, err
	}
	ms := make([]Member, len(addrs))
	for i, a := range addrs {
		ms[i] = Member{AllocID: fmt.Sprint("m", i), Index: i, Addr: a, Identity: testIdentity, ChecksPassing: true}
	}
	r.SetMembers(ms)
	deadline := time.Now().Add(10 * time.Second)
	for r.Status().Admitted != len(ms) {
		if time.Now().After(deadline) {
			_ = r.Close()
			return nil, fmt.Errorf("members not admitted: %+v", r.Status().Members)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r, nil
}

// startNginx runs nginx in the foreground with a generated config: round
// robin over members with kept-alive upstream connections, no access log.
// It returns its address and process ID, or false, saying why, when nginx
// is not installed. nginx runs as one process (master_process off), so
// that its CPU time is that process's.
func startNginx(b *testing.B, members []string) (string, int, bool) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			b.Logf("nginx not installed (Debian package nginx; apt-get install -y nginx): skipping the nginx comparison")
			return "", 0, false
		}
		bin = "/usr/sbin/nginx"
	}
	dir := b.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", porttest.Take(b))
	var ups strings.Builder
	for _, m := range members {
		fmt.Fprintf(&ups, "    server %s;\n", m)
	}
	conf := fmt.Sprintf(`master_process off;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream members {
%[2]s    keepalive 64;
  }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://members;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`, dir, ups.String(), addr)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting nginx: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // SIGINT: fast shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := benchGet(c, "http://"+addr+"/v1/completions")
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			b.Fatalf("nginx exited (%v): %s", errors.Join(werr, err), log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			b.Fatalf("nginx not answering on %s: %v: %s", addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.CloseIdleConnections()
	b.Logf("nginx %s: one process (master_process off), upstream round robin over %d members, keepalive 64, access_log off", bin, len(members))
	return addr, cmd.Process.Pid, true
}

// BenchmarkRouterRequest is one GET through the router at a time
// (closed loop), for the router's CPU and allocations per request; the
// direct sub-benchmark is the same GET to a member without the router.
func BenchmarkRouterRequest(b *testing.B) {
	addrs, stop, err := startBenchMembers(3)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	r, err := startBenchRouter(addrs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	for _, tc := range []struct{ name, url string }{
		{"direct", "http://" + addrs[0] + "/v1/completions"},
		{"router", "http://" + r.Addr() + "/v1/completions"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			defer c.CloseIdleConnections()
			b.ReportAllocs()
			for b.Loop() {
				if err := benchGet(c, tc.url); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
