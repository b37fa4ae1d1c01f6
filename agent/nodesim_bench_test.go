package agent_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/nodesim"
	"github.com/gpulayer/gpulayer/internal/waittest"
)

// nodesimSize reads GPULAYER_NODESIM_NODES and GPULAYER_NODESIM_ALLOCS
// (defaults 10,000 nodes and 100,000 allocations: the fleet of issue 17;
// 1,000 and 10,000 are enough while developing).
func nodesimSize(b *testing.B) (nodes, allocs int) {
	nodes, allocs = 10000, 100000
	for _, v := range []struct {
		env string
		out *int
	}{{"GPULAYER_NODESIM_NODES", &nodes}, {"GPULAYER_NODESIM_ALLOCS", &allocs}} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				b.Fatalf("%s=%q: want a positive number", v.env, s)
			}
			*v.out = n
		}
	}
	if allocs%100 != 0 {
		b.Fatalf("GPULAYER_NODESIM_ALLOCS=%d: want a multiple of 100 (jobs of 100)", allocs)
	}
	return nodes, allocs
}

// procCPU returns the CPU time (user + system) the process has used.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("read process stat: %v", err)
	}
	// Fields after the command name (in parentheses, may hold spaces):
	// utime and stime are the 12th and 13th (clock ticks, 100 a second).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procRSSMiB returns the process's resident set in MiB.
func procRSSMiB(b *testing.B, pid int) float64 { return procStatusMiB(b, pid, "VmRSS") }

// procStatusMiB returns a kB field of /proc/<pid>/status (VmRSS, RssAnon:
// the heap and stacks, RssFile: mapped files such as the Raft log's
// BoltDB) in MiB.
func procStatusMiB(b *testing.B, pid int, field string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("read process status: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, field+":") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// selfCPU returns this process's CPU time: the simulator's, with the
// benchmark's own small part.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cores measures, over window, the cores the server process and this
// process used.
func cores(b *testing.B, pid int, window time.Duration) (server, sim float64) {
	s0, m0, t0 := procCPU(b, pid), selfCPU(), time.Now()
	time.Sleep(window)
	el := time.Since(t0).Seconds()
	return (procCPU(b, pid) - s0).Seconds() / el, (selfCPU() - m0).Seconds() / el
}

// BenchmarkNodeSim measures one real server process (ACLs on) with a
// simulated fleet (agent/client/nodesim: every node registers, heartbeats
// and acknowledges its allocations through the HTTP API with its node
// secret, as a client agent does) of GPULAYER_NODESIM_NODES nodes of 8
// GPUs (H100, A100, L4, A10 in turn; default 10,000 nodes) and
// GPULAYER_NODESIM_ALLOCS one-GPU batch allocations (default 100,000, in
// jobs of 100 registered through PUT /v1/jobs by 8 writers). Each
// allocation completes as soon as it is acknowledged running. It reports:
//
//   - idle-cores-empty: the server's CPU (cores) over 30 s with the fleet
//     heartbeating and no allocation;
//   - placements/s: allocations acknowledged running by their simulated
//     node per second, from the first job registration to the last
//     acknowledgement, with server-cores and sim-cores over that time;
//   - idle-cores-finished: the server's CPU over 30 s once every
//     allocation is finished and stored;
//   - rss-MiB: the server's resident memory then, and its parts
//     rss-anon-MiB (heap, stacks) and rss-file-MiB (mapped files: the
//     Raft log's BoltDB);
//   - snapshot-s: the time of GET /v1/operator/snapshot then.
//
// GPULAYER_NODESIM_SCHEDULERS sets the server's num_schedulers (its
// default otherwise); GPULAYER_NODESIM_SERVER_GOGC and
// GPULAYER_NODESIM_SERVER_GOMEMLIMIT set the server process's GOGC and
// GOMEMLIMIT (the simulator keeps its own). With
// GPULAYER_DEBUG_CPUPROFILE_DIR set, the server writes its CPU profile of
// the placement window there (cpu-1.pprof). With
// GPULAYER_NODESIM_FULLPOLL=1 the nodes watch their allocations the way
// clients did before the change routes (every allocation with its job at
// each wake-up, from the leader), and with GPULAYER_NODESIM_JSON=1 they
// speak JSON on the node routes instead of msgpack: each for a
// before/after ratio.
//
// It fails if a GPU instance was given to two live allocations of a node
// or a node was marked down.
func BenchmarkNodeSim(b *testing.B) {
	nodes, allocs := nodesimSize(b)
	bin := gpulayerBinary(b)
	root := b.TempDir()
	httpPort, raftPort, serfPort := freePort(b), freePort(b), freePort(b)
	cfgPath := filepath.Join(root, "server.hcl")
	// The whole fleet comes from 127.0.0.1: no per-IP connection limit.
	hcl := "server {\n  encrypt = \"" + clusterGossipKey + "\"\n"
	if v := os.Getenv("GPULAYER_NODESIM_SCHEDULERS"); v != "" {
		// For comparisons: the server's scheduler workers.
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("GPULAYER_NODESIM_SCHEDULERS=%q: want a positive number", v)
		}
		hcl += fmt.Sprintf("  num_schedulers = %d\n", n)
	}
	hcl += "}\nlimits {\n  http_max_conns_per_client = -1\n}\n"
	if err := os.WriteFile(cfgPath, []byte(hcl), 0o600); err != nil {
		b.Fatal(err)
	}
	p := &proc{t: b, name: "server0", bin: bin, httpAddr: fmt.Sprintf("127.0.0.1:%d", httpPort), raftAddr: fmt.Sprintf("127.0.0.1:%d", raftPort),
		args: []string{"agent", "-server", "-bootstrap-expect=1", "-data-dir=" + filepath.Join(root, "server0"), "-bind=127.0.0.1",
			fmt.Sprintf("-http-port=%d", httpPort), fmt.Sprintf("-raft-port=%d", raftPort), fmt.Sprintf("-serf-port=%d", serfPort),
			"-node=server0", "-log-level=WARN", "-config=" + cfgPath}}
	if v := os.Getenv("GPULAYER_NODESIM_SERVER_GOGC"); v != "" {
		// For comparisons: the server's GOGC (not the simulator's).
		p.env = append(p.env, "GOGC="+v)
	}
	if v := os.Getenv("GPULAYER_NODESIM_SERVER_GOMEMLIMIT"); v != "" {
		// For comparisons: the server's soft memory limit (not the simulator's).
		p.env = append(p.env, "GOMEMLIMIT="+v)
	}
	c := &testCluster{t: b, servers: []*proc{p}}
	c.http = &http.Client{Timeout: 5 * time.Minute, Transport: tokenTransport{c: c, base: &http.Transport{MaxIdleConnsPerHost: 64}}}
	b.Cleanup(c.stopAll)
	p.start()
	clientToken := c.bootstrapACL(p, 60*time.Second)
	c.waitStable(60 * time.Second)
	pid := p.cmd.Process.Pid

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startReg := time.Now()
	fullPoll := os.Getenv("GPULAYER_NODESIM_FULLPOLL") == "1"
	fleet, err := nodesim.Start(ctx, nodesim.Config{Servers: []string{p.httpAddr}, Nodes: nodes, GPUs: 8, RegisterToken: clientToken, RunFor: 0, FullPoll: fullPoll,
		JSONOnly: os.Getenv("GPULAYER_NODESIM_JSON") == "1"})
	if err != nil {
		b.Fatalf("start the fleet: %v", err)
	}
	defer fleet.Stop()
	b.Logf("%d nodes registered in %s", nodes, time.Since(startReg).Round(time.Millisecond))
	rssNodes := procRSSMiB(b, pid)

	time.Sleep(5 * time.Second)
	hb0 := fleet.Stats().Heartbeats
	idleEmpty, simIdle := cores(b, pid, 30*time.Second)
	hbRate := float64(fleet.Stats().Heartbeats-hb0) / 30

	// The workload: jobs of 100 one-GPU allocations, 8 writers.
	jobs := allocs / 100
	start := time.Now()
	s0, m0 := procCPU(b, pid), selfCPU()
	cpuProfile := os.Getenv("GPULAYER_DEBUG_CPUPROFILE_DIR") != ""
	if cpuProfile {
		// The server inherits the variable (command/cpuprofile.go): its
		// CPU profile of the placement, cpu-1.pprof, runs until the next
		// signal.
		_ = p.cmd.Process.Signal(syscall.SIGUSR1)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				code, body := c.send(p, http.MethodPut, "/v1/jobs", gpuBatchJob(fmt.Sprintf("sim-%05d", j)), nil)
				if code != http.StatusOK {
					errs <- fmt.Errorf("PUT /v1/jobs: %d %s", code, body)
					return
				}
			}
		}()
	}
	for j := 0; j < jobs; j++ {
		next <- j
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.Logf("%d jobs registered in %s", jobs, time.Since(start).Round(time.Millisecond))
	waittest.For(b, 30*time.Minute, "every allocation acknowledged running", func() (bool, string) {
		st := fleet.Stats()
		return st.Acked >= int64(allocs), fmt.Sprintf("%+v", st)
	})
	took := time.Since(start)
	if cpuProfile {
		_ = p.cmd.Process.Signal(syscall.SIGUSR1)
	}
	logServerTimes(b, c, p)
	serverCores := (procCPU(b, pid) - s0).Seconds() / took.Seconds()
	simCores := (selfCPU() - m0).Seconds() / took.Seconds()
	waittest.For(b, 10*time.Minute, "every allocation reported complete", func() (bool, string) {
		st := fleet.Stats()
		return st.Completed >= int64(allocs), fmt.Sprintf("%+v", st)
	})

	time.Sleep(5 * time.Second)
	idleFinished, _ := cores(b, pid, 30*time.Second)
	rss := procRSSMiB(b, pid)
	rssAnon, rssFile := procStatusMiB(b, pid, "RssAnon"), procStatusMiB(b, pid, "RssFile")
	if dir := os.Getenv("GPULAYER_DEBUG_MEMPROFILE_DIR"); dir != "" {
		// The server inherits the variable (command/memprofile.go): ask it
		// for its heap profile and memory figures at this point.
		_ = p.cmd.Process.Signal(syscall.SIGUSR2)
		waittest.For(b, time.Minute, "the server's heap profile", func() (bool, string) {
			_, err := os.Stat(filepath.Join(dir, "heap-1.pprof"))
			return err == nil, fmt.Sprint(err)
		})
	}

	snapStart := time.Now()
	resp, err := c.http.Get(p.url() + "/v1/operator/snapshot")
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("snapshot: %d", resp.StatusCode)
	}
	snapTook := time.Since(snapStart)

	st := fleet.Stats()
	var down struct{ n int }
	var list []struct{ Status string }
	if code, body := c.send(p, http.MethodGet, "/v1/nodes", nil, &list); code != http.StatusOK {
		b.Fatalf("GET /v1/nodes: %d %s", code, body)
	}
	for _, nd := range list {
		if nd.Status != "ready" {
			down.n++
		}
	}
	if st.GPUConflicts != 0 || down.n != 0 || st.HeartbeatFailures != 0 {
		b.Fatalf("GPU conflicts %d, nodes not ready %d, heartbeat failures %d", st.GPUConflicts, down.n, st.HeartbeatFailures)
	}
	b.Logf("fleet: %+v; heartbeats %.1f/s; sim idle %.2f cores; snapshot %.1f MiB; RSS with nodes only %.0f MiB", st, hbRate, simIdle, float64(n)/(1<<20), rssNodes)
	b.ReportMetric(idleEmpty, "idle-cores-empty")
	b.ReportMetric(float64(allocs)/took.Seconds(), "placements/s")
	b.ReportMetric(serverCores, "server-cores")
	b.ReportMetric(simCores, "sim-cores")
	b.ReportMetric(idleFinished, "idle-cores-finished")
	b.ReportMetric(rss, "rss-MiB")
	b.ReportMetric(rssAnon, "rss-anon-MiB")
	b.ReportMetric(rssFile, "rss-file-MiB")
	b.ReportMetric(snapTook.Seconds(), "snapshot-s")
}

// logServerTimes logs the server's time per Raft message type, per
// evaluation and per route (counts and sums of /v1/metrics histograms):
// where the placement time went. With GPULAYER_NODESIM_METRICS_OUT set
// they go to that file instead.
func logServerTimes(b *testing.B, c *testCluster, p *proc) {
	resp, err := c.http.Get(p.url() + "/v1/metrics?format=prometheus")
	if err != nil {
		b.Logf("metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	var keep []string
	for _, line := range strings.Split(string(raw), "\n") {
		if (strings.Contains(line, "duration_seconds_sum") || strings.Contains(line, "duration_seconds_count")) && !strings.HasPrefix(line, "#") {
			keep = append(keep, line)
		}
	}
	if out := os.Getenv("GPULAYER_NODESIM_METRICS_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
			b.Logf("write %s: %v", out, err)
		}
		return
	}
	for _, line := range keep {
		b.Log(line)
	}
}

// gpuBatchJob is the PUT /v1/jobs body of a batch job of 100 allocations,
// each one native task asking for one GPU, 100 MHz and 256 MiB.
func gpuBatchJob(id string) map[string]interface{} {
	return map[string]interface{}{"Job": map[string]interface{}{
		"ID": id, "Type": "batch",
		"TaskGroups": []interface{}{map[string]interface{}{"Name": "train", "Count": 100, "Tasks": []interface{}{map[string]interface{}{
			"Name": "t", "Driver": "native", "Config": map[string]interface{}{"command": "/bin/true"},
			"Resources": map[string]interface{}{"CPU": 100, "MemoryMB": 256,
				"Devices": []interface{}{map[string]interface{}{"Name": "nvidia/gpu", "Count": 1}}},
		}}}},
	}}
}
