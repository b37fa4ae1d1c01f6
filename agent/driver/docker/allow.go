package docker

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/moby/moby/api/types/container"

	"github.com/gpulayer/gpulayer/agent/driver"
)

// DefaultCaps is the capability set of a docker task that asks for none:
// Docker's default set less NET_RAW (raw sockets let a container forge
// packets on the host's networks), as Nomad's docker driver does, and less
// MKNOD: the allocation directory is a host directory mounted at /alloc
// without nodev, so a device node a container made there (mknod
// /alloc/disk b 254 0, mode 0666) would open the host's disk to any local
// user who reaches the path. It is also what cap_add may name on a client
// that sets no allow_caps; MKNOD and NET_RAW need allow_caps.
var DefaultCaps = []string{
	"audit_write", "chown", "dac_override", "fowner", "fsetid", "kill",
	"net_bind_service", "setfcap", "setgid", "setpcap", "setuid", "sys_chroot",
}

// Allowances is what a client lets docker tasks ask of the host beyond a
// plain container: the agent config's client { docker { ... } } block,
// named as the keys of Nomad's docker plugin config. The zero value allows
// nothing: no privileged mode, no capability beyond DefaultCaps, no host
// namespace, no mount from outside the allocation directory.
type Allowances struct {
	// Privileged lets a task set privileged = true (allow_privileged).
	Privileged bool
	// Caps lists the capabilities a task's cap_add may name, lower case
	// without "cap_" (allow_caps); "all" allows every one. Empty means
	// DefaultCaps.
	Caps []string
	// HostNetwork, HostPID, HostIPC and HostUserns let a task set
	// network_mode, pid_mode, ipc_mode and userns_mode to "host"
	// (allow_host_network, allow_host_pid, allow_host_ipc,
	// allow_host_userns).
	HostNetwork bool
	HostPID     bool
	HostIPC     bool
	HostUserns  bool
	// Volumes lets a mount's source be an absolute host path outside the
	// allocation directory (volumes { enabled = true }).
	Volumes bool
}

// normCap turns "CAP_SYS_ADMIN" or "sys_admin" into "sys_admin".
func normCap(c string) string {
	return strings.TrimPrefix(strings.ToLower(strings.TrimSpace(c)), "cap_")
}

// allowsCap reports whether cap_add may name c.
func (a Allowances) allowsCap(c string) bool {
	list := a.Caps
	if len(list) == 0 {
		list = DefaultCaps
	}
	for _, l := range list {
		if n := normCap(l); n == "all" || n == c {
			return true
		}
	}
	return false
}

// check refuses what tc asks beyond a: every error wraps
// driver.ErrInvalidConfig and names the task's key and the client setting
// that would allow it.
func (a Allowances) check(tc *taskConfig) error {
	refuse := func(key, value, setting string) error {
		return fmt.Errorf("%w: key %q = %s is not allowed on this client (the client's docker { %s } setting allows it)", driver.ErrInvalidConfig, key, value, setting)
	}
	if tc.Privileged && !a.Privileged {
		return refuse("privileged", "true", "allow_privileged = true")
	}
	for _, c := range tc.CapAdd {
		if !a.allowsCap(c) {
			return refuse("cap_add", fmt.Sprintf("%q", c), "allow_caps")
		}
	}
	modes := []struct {
		key, value string
		allowed    bool
		setting    string
	}{
		{"network_mode", tc.NetworkMode, a.HostNetwork, "allow_host_network = true"},
		{"pid_mode", tc.PidMode, a.HostPID, "allow_host_pid = true"},
		{"ipc_mode", tc.IpcMode, a.HostIPC, "allow_host_ipc = true"},
		{"userns_mode", tc.UsernsMode, a.HostUserns, "allow_host_userns = true"},
	}
	for _, m := range modes {
		if m.value == "host" && !m.allowed {
			return refuse(m.key, `"host"`, m.setting)
		}
	}
	return nil
}

// capabilities returns the container's CapAdd and CapDrop: every
// capability is dropped, then DefaultCaps less the task's cap_drop, plus
// its (allowed) cap_add, are added back, so the set is exactly what the
// client allowed whatever the daemon's own default. A privileged
// container gets the daemon's full set and no list.
func capabilities(tc *taskConfig) (add, drop []string) {
	if tc.Privileged {
		return nil, nil
	}
	dropAll := false
	dropped := map[string]bool{}
	for _, c := range tc.CapDrop {
		if c == "all" {
			dropAll = true
		}
		dropped[c] = true
	}
	set := map[string]bool{}
	if !dropAll {
		for _, c := range DefaultCaps {
			if !dropped[c] {
				set[c] = true
			}
		}
	}
	for _, c := range tc.CapAdd {
		if c == "all" {
			// Only on a client whose allow_caps is "all".
			return []string{"ALL"}, nil
		}
		set[c] = true
	}
	for c := range set {
		add = append(add, "CAP_"+strings.ToUpper(c))
	}
	sort.Strings(add)
	return add, []string{"ALL"}
}

// applyAllowed puts the task's checked privileges into the host config.
func applyAllowed(tc *taskConfig, hc *container.HostConfig) {
	hc.Privileged = tc.Privileged
	hc.CapAdd, hc.CapDrop = capabilities(tc)
	if tc.NetworkMode != "" {
		hc.NetworkMode = container.NetworkMode(tc.NetworkMode)
	}
	if tc.PidMode != "" {
		hc.PidMode = container.PidMode(tc.PidMode)
	}
	if tc.IpcMode != "" {
		hc.IpcMode = container.IpcMode(tc.IpcMode)
	}
	if tc.UsernsMode != "" {
		hc.UsernsMode = container.UsernsMode(tc.UsernsMode)
	}
}

// modeValues are the values a namespace key may take; "container:<id>"
// joins another container's namespace and is refused (it would reach
// into containers of other jobs).
var modeValues = map[string][]string{
	"network_mode": {"bridge", "none", "host"},
	"pid_mode":     {"private", "host"},
	"ipc_mode":     {"private", "shareable", "none", "host"},
	"userns_mode":  {"host"},
}

// checkPrivilegeKeys reads the privilege keys of a task's config (their
// kinds and values; whether the client allows them is Allowances.check).
func checkPrivilegeKeys(m map[string]interface{}, tc *taskConfig) error {
	if raw, ok := m["privileged"]; ok {
		b, ok := raw.(bool)
		if !ok {
			return fmt.Errorf(`key "privileged" must be true or false, got %s`, driver.DescribeValue(raw))
		}
		tc.Privileged = b
	}
	for _, key := range []string{"cap_add", "cap_drop"} {
		list, err := driver.StringList(m, key)
		if err != nil {
			return err
		}
		var out []string
		for i, c := range list {
			n := normCap(c)
			if n == "" || strings.ContainsAny(n, " \t/") || len(n) > 64 {
				return fmt.Errorf(`key %q: element %d %q is not a capability name such as "net_admin"`, key, i, c)
			}
			out = append(out, n)
		}
		if key == "cap_add" {
			tc.CapAdd = out
		} else {
			tc.CapDrop = out
		}
	}
	for _, key := range []string{"network_mode", "pid_mode", "ipc_mode", "userns_mode"} {
		raw, ok := m[key]
		if !ok {
			continue
		}
		s, ok := raw.(string)
		if !ok || !slices.Contains(modeValues[key], s) {
			return fmt.Errorf(`key %q must be one of %s, got %s`, key, strings.Join(modeValues[key], ", "), driver.DescribeValue(raw))
		}
		switch key {
		case "network_mode":
			tc.NetworkMode = s
		case "pid_mode":
			tc.PidMode = s
		case "ipc_mode":
			tc.IpcMode = s
		case "userns_mode":
			tc.UsernsMode = s
		}
	}
	return nil
}
