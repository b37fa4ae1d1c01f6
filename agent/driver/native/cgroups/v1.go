package cgroups

import (
	"os"
	"path/filepath"
	"strconv"
)

// v1Required are the v1 hierarchies a task needs, each with a file only
// that controller's hierarchy holds.
var v1Required = []struct{ controller, marker string }{
	{"memory", "memory.limit_in_bytes"},
	{"cpu", "cpu.shares"},
}

// detectV1 checks the v1 memory and cpu hierarchies under cfg.V1Root and
// creates the parent cgroup in each. The cpuacct hierarchy, when mounted
// apart from cpu and writable, is used too, for CPUUsage; where it is
// mounted with cpu ("cpu,cpuacct"), the cpu directory holds its files.
func (m *Manager) detectV1(cfg Config) {
	var hs []hierarchy
	for _, r := range v1Required {
		mount := filepath.Join(cfg.V1Root, r.controller)
		if _, err := os.Stat(filepath.Join(mount, r.marker)); err != nil {
			m.none("no cgroup v2 with controllers at %s, and cgroup v1 %s hierarchy not mounted at %s", cfg.V2Root, r.controller, mount)
			return
		}
		parent := filepath.Join(mount, cfg.Parent)
		if err := m.mkdirAll(parent); err != nil {
			m.none("cgroup v1 %s hierarchy not writable: %s", r.controller, plain(err))
			return
		}
		if err := writable(parent); err != nil {
			m.none("cgroup v1 %s hierarchy not writable: %s", r.controller, plain(err))
			return
		}
		hs = append(hs, hierarchy{Controller: r.controller, Mount: mount, Parent: parent})
	}
	acct := filepath.Join(cfg.V1Root, "cpuacct")
	if _, err := os.Stat(filepath.Join(hs[1].Mount, "cpuacct.usage")); err != nil {
		if _, err := os.Stat(filepath.Join(acct, "cpuacct.usage")); err == nil {
			parent := filepath.Join(acct, cfg.Parent)
			if m.mkdirAll(parent) == nil && writable(parent) == nil {
				hs = append(hs, hierarchy{Controller: "cpuacct", Mount: acct, Parent: parent})
			} else {
				m.logger.Debug("cgroup v1 cpuacct hierarchy not writable; CPU usage unavailable", "mount", acct)
			}
		}
	}
	m.mode, m.v1 = ModeV1, hs
}

// setV1 writes l to a task's v1 cgroup directory in the hierarchy of
// controller: memory.limit_in_bytes and, where the kernel accounts swap,
// memory.memsw.limit_in_bytes to the same figure (no swap; it is written
// second because the kernel wants memsw >= memory); cpu.shares;
// cpu.cfs_period_us and cpu.cfs_quota_us. See
// Documentation/admin-guide/cgroup-v1/memory.rst and
// Documentation/scheduler/sched-bwc.rst.
func setV1(controller, dir string, l Limits) error {
	switch controller {
	case "memory":
		if l.MemoryBytes > 0 {
			v := strconv.FormatInt(l.MemoryBytes, 10)
			if err := writeValue(filepath.Join(dir, "memory.limit_in_bytes"), v); err != nil {
				return err
			}
			if err := writeIfExists(filepath.Join(dir, "memory.memsw.limit_in_bytes"), v); err != nil {
				return err
			}
		}
	case "cpu":
		if l.CPUShares > 0 {
			if err := writeValue(filepath.Join(dir, "cpu.shares"), strconv.FormatUint(l.CPUShares, 10)); err != nil {
				return err
			}
		}
		if l.CPUQuota > 0 {
			if err := writeValue(filepath.Join(dir, "cpu.cfs_period_us"), strconv.FormatInt(l.CPUPeriod, 10)); err != nil {
				return err
			}
			if err := writeValue(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(l.CPUQuota, 10)); err != nil {
				return err
			}
		}
	}
	return nil
}
