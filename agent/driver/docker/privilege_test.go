package docker

import (
	"errors"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/docker/dockertest"
)

// TestExploitDockerPrivileged: a docker task could ask for what makes a
// container the host's root: privileged mode, extra capabilities, the
// host's network, pid, ipc or user namespace, a mount of a host path. Each
// is now refused unless the client allows it, with an error naming the
// key and the setting; and a plain container runs with Docker's default
// capabilities less NET_RAW, whatever the daemon's own default.
func TestExploitDockerPrivileged(t *testing.T) {
	alloc := t.TempDir()
	base := func(kv ...interface{}) map[string]interface{} {
		m := map[string]interface{}{"image": "img"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name    string
		cfg     map[string]interface{}
		want    string
		allowed Allowances
	}{
		{"privileged", base("privileged", true), "allow_privileged", Allowances{Privileged: true}},
		{"cap_add", base("cap_add", []interface{}{"SYS_ADMIN"}), `key "cap_add" = "sys_admin"`, Allowances{Caps: []string{"sys_admin"}}},
		{"cap_add net_raw", base("cap_add", []interface{}{"net_raw"}), "allow_caps", Allowances{Caps: []string{"all"}}},
		{"host network", base("network_mode", "host"), "allow_host_network", Allowances{HostNetwork: true}},
		{"host pid", base("pid_mode", "host"), "allow_host_pid", Allowances{HostPID: true}},
		{"host ipc", base("ipc_mode", "host"), "allow_host_ipc", Allowances{HostIPC: true}},
		{"host userns", base("userns_mode", "host"), "allow_host_userns", Allowances{HostUserns: true}},
		{"host mount", base("mounts", []interface{}{map[string]interface{}{"source": "/etc", "target": "/host-etc"}}), "volumes { enabled = true }", Allowances{Volumes: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.cfg, alloc, Allowances{})
			if !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with %v, want an error naming %q", err, tc.want)
			}
			if _, err := parseConfig(tc.cfg, alloc, tc.allowed); err != nil {
				t.Fatalf("a client allowing it: %v", err)
			}
		})
	}
	// Joining another container's namespace is never allowed.
	if _, err := parseConfig(base("network_mode", "container:other"), alloc, Allowances{HostNetwork: true}); err == nil || !strings.Contains(err.Error(), `key "network_mode"`) {
		t.Fatalf("network_mode container:other: %v", err)
	}

	tc, err := parseConfig(base("cap_drop", []interface{}{"chown"}), alloc, Allowances{})
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{}
	cfg := &driver.TaskConfig{Name: "main", TaskDir: alloc + "/main"}
	_, hc, err := d.containerConfig(cfg, tc, alloc)
	if err != nil {
		t.Fatal(err)
	}
	if hc.Privileged || !slices.Equal(hc.CapDrop, []string{"ALL"}) || slices.Contains(hc.CapAdd, "CAP_NET_RAW") || slices.Contains(hc.CapAdd, "CAP_CHOWN") || !slices.Contains(hc.CapAdd, "CAP_KILL") {
		t.Fatalf("host config privileged=%v cap_add=%v cap_drop=%v, want every capability dropped and the default set less net_raw and the task's cap_drop added", hc.Privileged, hc.CapAdd, hc.CapDrop)
	}

	// A real container: its effective capabilities lack NET_RAW (13) and
	// SYS_ADMIN (21).
	image := dockertest.BuildImage(t)
	dd := newDriver(t)
	tcfg, out, _ := testTask(t, "caps", "caps")
	tcfg.Config["image"] = image
	if _, err := dd.StartTask(tcfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dd.DestroyTask(tcfg.ID) })
	if r := wait(t, dd, tcfg.ID, 30*time.Second); r.ExitCode != 0 {
		t.Fatalf("caps task: %+v", r)
	}
	waittest.Until(t, 5*time.Second, "CapEff line", func() bool { return strings.Contains(out.String(), "CapEff:") })
	hex := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out.String()), "CapEff:"))
	caps, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		t.Fatalf("CapEff %q: %v", out.String(), err)
	}
	if caps&(1<<13) != 0 || caps&(1<<21) != 0 || caps == 0 {
		t.Fatalf("container capabilities %#x include NET_RAW or SYS_ADMIN (or none at all)", caps)
	}
}
