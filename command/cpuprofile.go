package command

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// cpuProfileEnv names a directory: when it is set, each SIGUSR1 the agent
// receives starts a CPU profile (cpu-N.pprof) there and the next one stops
// and writes it. A debugging aid for measuring where the CPU goes during
// a window (BenchmarkNodeSim's placement, GPULAYER_NODESIM_CPUPROFILE);
// off unless the variable is set, so no signal changes a production agent.
const cpuProfileEnv = "GPULAYER_DEBUG_CPUPROFILE_DIR"

// startCPUProfiler installs the SIGUSR1 handler when cpuProfileEnv is set.
func startCPUProfiler(logger hclog.Logger) {
	dir := os.Getenv(cpuProfileEnv)
	if dir == "" {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		var f *os.File
		n := 0
		for range ch {
			if f != nil {
				pprof.StopCPUProfile()
				if err := f.Close(); err != nil {
					logger.Warn("cpu profile", "dir", dir, "error", err)
				}
				f = nil
				continue
			}
			n++
			var err error
			if f, err = os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", n))); err != nil {
				logger.Warn("cpu profile", "dir", dir, "error", err)
				continue
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				logger.Warn("cpu profile", "dir", dir, "error", err)
				f.Close()
				f = nil
			}
		}
	}()
}
