package devices

import (
	"errors"
	"testing"
)

// TestSampleNVML reads the telemetry of every NVIDIA GPU on the host. It
// skips where NVML is unavailable (no driver, no GPU, or a build without
// cgo), which is every CI host without a GPU.
func TestSampleNVML(t *testing.T) {
	groups, err := Detect()
	if errors.Is(err, ErrUnavailable) {
		if _, _, serr := SampleNVML([]string{"GPU-x"}); !errors.Is(serr, ErrUnavailable) {
			t.Fatalf("Detect says NVML is unavailable but SampleNVML says %v", serr)
		}
		t.Skipf("no NVML here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range groups {
		for _, in := range g.Instances {
			if in.Healthy {
				ids = append(ids, in.ID)
			}
		}
	}
	if len(ids) == 0 {
		t.Skip("NVML works but reports no healthy GPU")
	}
	usage, errs, err := SampleNVML(append(ids, "GPU-does-not-exist"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		u, ok := usage[id]
		if !ok {
			t.Errorf("%s: no reading (%v)", id, errs[id])
			continue
		}
		if u.UtilizationPercent < 0 || u.UtilizationPercent > 100 || u.MemoryTotalMiB <= 0 || u.MemoryUsedMiB < 0 || u.MemoryUsedMiB > u.MemoryTotalMiB {
			t.Errorf("%s: implausible reading %+v", id, u)
		}
		t.Logf("%s: %+v", id, u)
	}
	if errs["GPU-does-not-exist"] == nil {
		t.Error("an unknown UUID got no error")
	}
}
