package client

import (
	"fmt"
	"os/exec"
	"os/user"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/agent/driver/docker/dockertest"
	"github.com/gpulayer/gpulayer/agent/driver/native"
	"github.com/gpulayer/gpulayer/structs"
)

// benchStarts is how many starts each median is taken over.
const benchStarts = 20

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// eventTime returns the time of the task's first event of type typ.
func eventTime(a *structs.Allocation, typ string) int64 {
	if ts := a.TaskStates["main"]; ts != nil {
		for _, e := range ts.Events {
			if e.Type == typ {
				return e.Time
			}
		}
	}
	return 0
}

// allocToRunning runs benchStarts allocations one after the other and
// returns, for each, the time from the client receiving the allocation
// (its Received event) to the task running (its Started event, timed when
// the driver saw the task's process start).
func allocToRunning(b *testing.B, c *Client, srv *clienttest.Server, mk func() *structs.Allocation) []time.Duration {
	b.Helper()
	var out []time.Duration
	for i := 0; i < benchStarts; i++ {
		a := mk()
		srv.UpsertAlloc(a)
		got := srv.WaitForAlloc(b, a.ID, 60*time.Second, func(al *structs.Allocation) bool {
			return eventTime(al, structs.TaskEventStarted) != 0 || al.ClientTerminalStatus()
		})
		recv, started := eventTime(got, structs.TaskEventReceived), eventTime(got, structs.TaskEventStarted)
		if recv == 0 || started == 0 {
			b.Fatalf("allocation %s did not start: %+v", a.ID, got.TaskStates["main"])
		}
		out = append(out, time.Duration(started-recv))
		stop := got.Copy()
		stop.DesiredStatus = structs.AllocDesiredStatusStop
		srv.UpsertAlloc(stop)
		srv.WaitForAlloc(b, a.ID, 60*time.Second, terminal)
	}
	return out
}

// BenchmarkTaskStart is issue 5's "must show 6": the time from an
// allocation received by the client to its task running, median of 20,
// for the native driver beside a bare os/exec start of the same program,
// and for the docker driver beside a bare `docker run -d` of the same
// image. Reported as ms per median and as ratios (driver / bare).
func BenchmarkTaskStart(b *testing.B) {
	prog := dockertest.Prog(b)
	b.Run("native", func(b *testing.B) {
		for n := 0; n < b.N; n++ {
			srv := clienttest.NewServer()
			c := newBenchClient(b, srv)
			drv := allocToRunning(b, c, srv, func() *structs.Allocation {
				return clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, prog, []string{"sleep", "30"}, nil)
			})
			var bare []time.Duration
			for i := 0; i < benchStarts; i++ {
				cmd := exec.Command(prog, "sleep", "30")
				start := time.Now()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				bare = append(bare, time.Since(start))
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			report(b, "native", median(drv), "exec", median(bare))
		}
	})
	b.Run("docker", func(b *testing.B) {
		image := dockertest.BuildImage(b)
		for n := 0; n < b.N; n++ {
			srv := clienttest.NewServer()
			c := newBenchClient(b, srv)
			drv := allocToRunning(b, c, srv, func() *structs.Allocation {
				a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "", nil, nil)
				task := a.Job.TaskGroups[0].Tasks[0]
				task.Driver = "docker"
				task.KillSignal = "SIGKILL"
				task.Config = map[string]interface{}{"image": image, "args": []interface{}{"sleep", "30"}}
				return a
			})
			var bare []time.Duration
			for i := 0; i < benchStarts; i++ {
				name := fmt.Sprintf("gpulayer-bench-%d-%d", time.Now().UnixNano(), i)
				start := time.Now()
				out, err := exec.Command("docker", "run", "-d", "--name", name, image, "sleep", "30").CombinedOutput()
				if err != nil {
					b.Fatalf("docker run: %v: %s", err, out)
				}
				bare = append(bare, time.Since(start))
				_ = exec.Command("docker", "rm", "-f", strings.TrimSpace(name)).Run()
			}
			report(b, "docker", median(drv), "docker-run", median(bare))
		}
	})
}

func report(b *testing.B, name string, drv time.Duration, bareName string, bare time.Duration) {
	b.ReportMetric(float64(drv.Microseconds())/1000, name+"-ms/median")
	b.ReportMetric(float64(bare.Microseconds())/1000, bareName+"-ms/median")
	b.ReportMetric(float64(drv)/float64(bare), name+"/"+bareName)
}

func newBenchClient(b *testing.B, srv *clienttest.Server) *Client {
	b.Helper()
	me, err := user.Current()
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewClient(&Config{
		DataDir: b.TempDir(), NodeName: "bench", DevMode: true, DevGPUs: 0, Servers: srv,
		// The task runs as the benchmark's user: its program and temporary
		// directories are not reachable by "nobody" when that is root.
		NativeUsers:  native.UserPolicy{DefaultUser: me.Username},
		SyncInterval: 5 * time.Millisecond, RegisterTimeout: 10 * time.Second, detectGPUs: noGPUs,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Shutdown() })
	return c
}
