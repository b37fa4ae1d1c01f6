package devices

import (
	"hash/fnv"
	"math"
	"time"
)

// AttrSimulatedIdleUtilization, on a simulated device group, is the
// utilisation (percent, an integer attribute) its free GPUs report instead
// of the 0 to 2 % idle pattern: a simulated GPU busy outside the
// scheduler's view.
const AttrSimulatedIdleUtilization = "simulated_idle_utilization"

// simulatedPeriod is the period of the simulated utilisation wave.
const simulatedPeriod = 60 * time.Second

// SimulatedUsage returns made-up but repeatable telemetry for the simulated
// GPU id at time t: a device that no allocation holds idles at 0 to 2 %
// with no memory used; a held device follows a sine wave between 55 and
// 95 % (memory 30 to 50 % of totalMiB), phase-shifted per device by an FNV
// hash of its ID so two GPUs differ. A non-negative override replaces the
// utilisation: of a held device when a job asks for it with the
// "gpulayer.simulate.gpu_utilization" meta key, of a free one when the
// GPU's declaration sets idle_utilization (AttrSimulatedIdleUtilization),
// so tests can drive the idle policy and node pools' GPU idleness rules.
func SimulatedUsage(id string, held bool, override float64, totalMiB int64, t time.Time) Usage {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	phase := float64(h.Sum32()%360) * math.Pi / 180
	x := 2*math.Pi*float64(t.UnixNano()%int64(simulatedPeriod))/float64(simulatedPeriod) + phase
	if !held {
		util := math.Round(1 + math.Sin(x))
		if override >= 0 {
			util = math.Min(override, 100)
		}
		return Usage{UtilizationPercent: util, MemoryTotalMiB: totalMiB}
	}
	util := 75 + 20*math.Sin(x)
	if override >= 0 {
		util = math.Min(override, 100)
	}
	mem := int64(float64(totalMiB) * (0.40 + 0.10*math.Sin(x)))
	return Usage{UtilizationPercent: math.Round(util*10) / 10, MemoryUsedMiB: mem, MemoryTotalMiB: totalMiB}
}
