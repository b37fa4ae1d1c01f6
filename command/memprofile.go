package command

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// memProfileEnv names a directory: when it is set, the agent writes its
// heap profile (heap-N.pprof) and its memory figures (mem-N.txt: live
// heap, heap goal, stacks, idle and released spans from runtime/metrics)
// there each time it receives SIGUSR2. A debugging aid for measuring
// where the resident memory goes (BenchmarkNodeSim uses it); off unless
// the variable is set, so no signal changes a production agent.
const memProfileEnv = "GPULAYER_DEBUG_MEMPROFILE_DIR"

// memMetrics are the runtime/metrics figures mem-N.txt holds.
var memMetrics = []string{
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/metadata/mspan/inuse:bytes",
	"/memory/classes/other:bytes",
	"/gc/heap/goal:bytes",
	"/gc/heap/live:bytes",
	"/gc/cycles/total:gc-cycles",
	"/gc/gogc:percent",
	"/gc/gomemlimit:bytes",
	"/sched/goroutines:goroutines",
}

// startMemProfiler installs the SIGUSR2 handler when memProfileEnv is set.
func startMemProfiler(logger hclog.Logger) {
	dir := os.Getenv(memProfileEnv)
	if dir == "" {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	var n atomic.Int64
	go func() {
		for range ch {
			i := n.Add(1)
			if err := writeMemProfile(dir, i); err != nil {
				logger.Warn("memory profile", "dir", dir, "error", err)
			}
		}
	}()
}

// writeMemProfile writes mem-i.txt (before a forced GC, so the figures are
// what the process held, then the live heap that GC left, as
// "after-gc:/gc/heap/live:bytes N") and heap-i.pprof (the live heap as of
// that GC).
func writeMemProfile(dir string, i int64) error {
	samples := make([]metrics.Sample, len(memMetrics))
	for k, name := range memMetrics {
		samples[k].Name = name
	}
	metrics.Read(samples)
	txt := ""
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			txt += fmt.Sprintf("%s %d\n", s.Name, s.Value.Uint64())
		}
	}
	runtime.GC()
	after := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(after)
	if after[0].Value.Kind() == metrics.KindUint64 {
		txt += fmt.Sprintf("after-gc:%s %d\n", after[0].Name, after[0].Value.Uint64())
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("mem-%d.txt", i)), []byte(txt), 0o600); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", i)))
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
