package cgroups

import (
	"os/exec"
	"sort"
	"testing"
	"time"
)

// BenchmarkV1PlacementStart times a start of /bin/true into a task cgroup
// on the host's v1 hierarchies both ways, interleaved so both see the same
// load: Start (the caller joins the task's cgroups for the fork and goes
// back: two migrations of the caller, every thread of it, per hierarchy)
// and StartStopped (the task alone moved once per hierarchy while stopped
// at its exec), which the native shim uses. It reports each median in ms
// and their ratio.
func BenchmarkV1PlacementStart(b *testing.B) {
	needRoot(b, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/cpu/cpu.shares")
	m := Detect(Config{Parent: testParent(b)})
	removeParents(b, m)
	if m.Mode() != ModeV1 {
		b.Skipf("mode %s, not v1", m.Mode())
	}
	c, err := m.Create("alloc-bench/start", Limits{MemoryBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Destroy() })
	p := c.Placement()
	const runs = 40
	var joined, stopped []time.Duration
	for n := 0; n < b.N; n++ {
		for i := 0; i < runs; i++ {
			for _, viaPtrace := range []bool{false, true} {
				cmd := exec.Command("/bin/true")
				start := time.Now()
				start1 := p.Start
				if viaPtrace {
					start1 = p.StartStopped
				}
				err := start1(cmd)
				d := time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				_ = cmd.Wait()
				if viaPtrace {
					stopped = append(stopped, d)
				} else {
					joined = append(joined, d)
				}
			}
		}
	}
	med := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	j, s := med(joined), med(stopped)
	b.ReportMetric(float64(j.Microseconds())/1000, "joined-ms/median")
	b.ReportMetric(float64(s.Microseconds())/1000, "stopped-ms/median")
	b.ReportMetric(float64(s)/float64(j), "stopped/joined")
}
