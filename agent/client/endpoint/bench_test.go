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
// It reports p50 and p99 per target, the added latency (target - direct)
// and the ratio router-added / nginx-added (below 1: the router adds less).
// Without nginx installed it says so and measures direct and router only.
func BenchmarkRouterAddedLatency(b *testing.B) {
	rate := envInt(b, "ENDPOINT_BENCH_RATE", 1000)
	count := envInt(b, "ENDPOINT_BENCH_REQUESTS", 10000)

	// By default members and router run in this process, beside the
	// load generator (the router shares its Go runtime with both while
	// nginx has a process of its own); ENDPOINT_BENCH_PROCS=separate runs
	// members and router in processes of their own, as in production,
	// which costs more context switches than a shared 2-core machine may
	// give at 3,000 requests/s.
	var addrs []string
	var routerAddr, layout string
	switch v := os.Getenv("ENDPOINT_BENCH_PROCS"); v {
	case "separate":
		addrs = strings.Split(spawnBenchChild(b, "members", ""), ",")
		routerAddr = spawnBenchChild(b, "router", strings.Join(addrs, ","))
		layout = "members and router each in a process of their own"
	case "", "shared":
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
	if nginxAddr, ok := startNginx(b, addrs); ok {
		targets = append(targets, &benchTarget{name: "nginx", url: "http://" + nginxAddr + "/v1/completions"})
	}
	for _, t := range targets {
		t.client = &http.Client{
			Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0, DisableCompression: true},
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
		sent := runLoad(targets, rate, count)
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
	b.Logf("%d GETs per target at %d/s each, targets interleaved, 3 Go net/http members, %s, nginx in its own; GOMAXPROCS=%d, %d CPUs",
		count, rate, layout, runtime.GOMAXPROCS(0), runtime.NumCPU())
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
// It returns false, saying why, when nginx is not installed.
func startNginx(b *testing.B, members []string) (string, bool) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			b.Logf("nginx not installed (Debian package nginx; apt-get install -y nginx): skipping the nginx comparison")
			return "", false
		}
		bin = "/usr/sbin/nginx"
	}
	dir := b.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", porttest.Take(b))
	var ups strings.Builder
	for _, m := range members {
		fmt.Fprintf(&ups, "    server %s;\n", m)
	}
	conf := fmt.Sprintf(`worker_processes 1;
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
	b.Logf("nginx %s: worker_processes 1, upstream round robin over %d members, keepalive 64, access_log off", bin, len(members))
	return addr, true
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
