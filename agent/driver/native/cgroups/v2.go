package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// v2Controllers are the controllers a v2 task cgroup needs for limits.
var v2Controllers = []string{"cpu", "memory"}

// detectV2 checks the unified hierarchy at cfg.V2Root and creates the
// parent cgroup with the cpu and memory controllers enabled for its
// children (cgroup.subtree_control), enabling them in the root first
// when they are not. See Documentation/admin-guide/cgroup-v2.rst,
// "Enabling and Disabling".
func (m *Manager) detectV2(cfg Config) {
	root := cfg.V2Root
	parent := filepath.Join(root, cfg.Parent)
	if !cfg.PlacementOnly {
		b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err != nil {
			m.none("cgroup v2 controllers of %s unreadable: %s", root, plain(err))
			return
		}
		have := strings.Fields(string(b))
		if missing := missingControllers(have); len(missing) > 0 {
			m.none("cgroup v2 at %s lacks the %s controller(s) (it has: %s)", root, strings.Join(missing, " and "), strings.Join(have, " "))
			return
		}
		if err := enableControllers(root); err != nil {
			m.none("cgroup v2: cannot enable cpu and memory for the children of %s: %s", root, plain(err))
			return
		}
	}
	if err := m.mkdirAll(parent); err != nil {
		m.none("cgroup v2 hierarchy at %s not writable: %s", root, plain(err))
		return
	}
	if err := writable(parent); err != nil {
		m.none("cgroup v2 parent %s not writable: %s", parent, plain(err))
		return
	}
	if !cfg.PlacementOnly {
		if err := enableControllers(parent); err != nil {
			m.none("cgroup v2: cannot enable cpu and memory in %s: %s", parent, plain(err))
			return
		}
	}
	m.mode, m.v2 = ModeV2, parent
}

// missingControllers returns the v2Controllers absent from have.
func missingControllers(have []string) []string {
	var missing []string
	for _, c := range v2Controllers {
		found := false
		for _, h := range have {
			found = found || h == c
		}
		if !found {
			missing = append(missing, c)
		}
	}
	return missing
}

// enableControllers makes sure dir's children get the cpu and memory
// controllers, writing "+cpu +memory" to its cgroup.subtree_control
// unless it already lists both.
func enableControllers(dir string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if len(missingControllers(strings.Fields(string(b)))) == 0 {
		return nil
	}
	return writeValue(file, "+cpu +memory")
}

// setV2 writes l to the v2 task cgroup dir: memory.max and, where the
// kernel accounts swap, memory.swap.max = 0; cpu.weight; cpu.max as
// "quota period". Files of limits l does not set are left alone.
func setV2(dir string, l Limits) error {
	if l.MemoryBytes > 0 {
		if err := writeValue(filepath.Join(dir, "memory.max"), strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			return err
		}
		if err := writeIfExists(filepath.Join(dir, "memory.swap.max"), "0"); err != nil {
			return err
		}
	}
	if l.CPUShares > 0 {
		if err := writeValue(filepath.Join(dir, "cpu.weight"), strconv.FormatUint(CPUWeight(l.CPUShares), 10)); err != nil {
			return err
		}
	}
	if l.CPUQuota > 0 {
		if err := writeValue(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", l.CPUQuota, l.CPUPeriod)); err != nil {
			return err
		}
	}
	return nil
}
