package docker_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/server/provision/docker"
	"github.com/gpulayer/gpulayer/structs"
)

// TestAgentConfigParses renders the container agent's config for a request
// full of characters HCL treats specially and parses it with the agent's
// own parser: every value arrives as it was, nothing is evaluated.
func TestAgentConfigParses(t *testing.T) {
	hostile := `a"b\c ${file("/etc/passwd")} %{ if true }x%{ endif }`
	req := provision.CreateRequest{
		Pool: "gpu", IdempotencyKey: "k1", NodeName: "node-" + hostile,
		Shape: structs.NodeShape{NodeClass: hostile, GPUModel: "NVIDIA A100-SXM4-80GB", GPUCount: 2, GPUMemoryMB: 81920,
			MemoryModel: "discrete", Availability: "opportunistic"},
		Join: provision.JoinInfo{Servers: []string{"127.0.0.1:4656", "http://10.0.0.2:4656"}, Token: "tok-" + hostile, Region: "r1", Datacenter: "dc9"},
	}
	s, err := docker.ParseSettings(map[string]string{docker.KeyLogLevel: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	src, err := docker.AgentConfig(req, s, 4701)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := agent.ParseConfig("agent.hcl", src)
	if err != nil {
		t.Fatalf("parse:\n%s\n%v", src, err)
	}
	full := agent.DefaultConfig()
	full.Merge(cfg)
	if err := full.Validate(); err != nil {
		t.Fatalf("validate:\n%s\n%v", src, err)
	}
	c := full.Client
	switch {
	case full.Name != req.NodeName, full.Region != "r1", full.Datacenter != "dc9", full.BindAddr != "127.0.0.1",
		full.Ports.HTTP != 4701, full.DataDir != docker.DataDir, full.LogLevel != "DEBUG", full.ACLToken() != req.Join.Token:
		t.Errorf("agent settings: %+v (token %q)", full, full.ACLToken())
	case !c.Enabled, len(c.Servers) != 2 || c.Servers[1] != "http://10.0.0.2:4656", c.NodeClass != hostile,
		c.MemoryModel != "discrete", c.Availability != "opportunistic", c.NodePool != "gpu":
		t.Errorf("client settings: %+v", c)
	case len(c.SimulatedGPUs) != 1 || c.SimulatedGPUs[0].Count != 2 || c.SimulatedGPUs[0].Model != "NVIDIA A100-SXM4-80GB" || c.SimulatedGPUs[0].Memory != 81920:
		t.Errorf("simulated GPUs: %+v", c.SimulatedGPUs)
	}

	// 4701 is the second of the default 100 ports: the second of 100
	// slices of 20000-32000.
	if c.MinDynamicPort != 20120 || c.MaxDynamicPort != 20239 {
		t.Errorf("dynamic ports %d-%d, want 20120-20239", c.MinDynamicPort, c.MaxDynamicPort)
	}

	// No GPUs in the shape: none simulated either.
	req.Shape.GPUCount = 0
	src, err = docker.AgentConfig(req, s, 4701)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = agent.ParseConfig("agent.hcl", src)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Client.SimulatedGPUs) != 0 || cfg.Client.DevGPUs == nil || *cfg.Client.DevGPUs != 0 {
		t.Errorf("a shape without GPUs: %s", src)
	}
	// No token (a cluster with ACLs off): no acl block; the agent keeps
	// its defaults.
	req.Join.Token = ""
	if src, err = docker.AgentConfig(req, s, 4701); err != nil {
		t.Fatal(err)
	}
	if cfg, err = agent.ParseConfig("agent.hcl", src); err != nil {
		t.Fatal(err)
	}
	if cfg.ACL != nil {
		t.Errorf("without a token: %s", src)
	}
}

// TestDynamicPortWindows: the containers' dynamic port ranges (they share
// the host's network) are disjoint, inside the default range, and left
// alone when the range cannot be split into useful slices.
func TestDynamicPortWindows(t *testing.T) {
	s, err := docker.ParseSettings(map[string]string{docker.KeyHTTPPorts: "15000-15002"})
	if err != nil {
		t.Fatal(err)
	}
	type window struct{ lo, hi int }
	var got []window
	for _, port := range s.HTTPPorts {
		lo, hi, ok := docker.DynamicPortWindow(s.HTTPPorts, port)
		if !ok || lo < structs.DefaultMinDynamicPort || hi > structs.DefaultMaxDynamicPort || lo > hi {
			t.Fatalf("port %d: %d-%d %v", port, lo, hi, ok)
		}
		for _, w := range got {
			if lo <= w.hi && w.lo <= hi {
				t.Fatalf("port %d: %d-%d overlaps %d-%d", port, lo, hi, w.lo, w.hi)
			}
		}
		got = append(got, window{lo, hi})
	}
	many, err := docker.ParseSettings(map[string]string{docker.KeyHTTPPorts: "30000-34000"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := docker.DynamicPortWindow(many.HTTPPorts, 30000); ok {
		t.Error("4001 containers got slices of fewer than 8 ports")
	}
	if _, _, ok := docker.DynamicPortWindow(s.HTTPPorts, 9); ok {
		t.Error("a port outside the list got a slice")
	}
}

// TestParseSettings: defaults, and each bad key refused by name.
func TestParseSettings(t *testing.T) {
	s, err := docker.ParseSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.MemoryMB != docker.DefaultMemoryMB || s.Pids != docker.DefaultPids || s.NanoCPUs != docker.DefaultNanoCPUs ||
		len(s.HTTPPorts) != 100 || s.HTTPPorts[0] != 4700 || s.LogLevel != "INFO" {
		t.Errorf("defaults: %+v", s)
	}
	s, err = docker.ParseSettings(map[string]string{docker.KeyHTTPPorts: "15002, 15000-15001,15002", docker.KeyCPUs: "0.5", docker.KeyMemoryMB: "256"})
	if err != nil || len(s.HTTPPorts) != 3 || s.HTTPPorts[0] != 15000 || s.NanoCPUs != 5e8 || s.MemoryMB != 256 {
		t.Errorf("settings: %+v, %v", s, err)
	}
	for _, tc := range []struct {
		pc   map[string]string
		want string
	}{
		{map[string]string{"imgae": "x"}, `unknown key "imgae"`},
		{map[string]string{docker.KeyImage: "Bad Image"}, "image: \"Bad Image\" is not an image reference"},
		{map[string]string{docker.KeyBinary: "gpulayer"}, "binary: \"gpulayer\" must be a clean absolute path"},
		{map[string]string{docker.KeyMemoryMB: "8"}, "memory_mb: \"8\" must be a whole number between 64"},
		{map[string]string{docker.KeyPids: "many"}, "pids: \"many\""},
		{map[string]string{docker.KeyCPUs: "0"}, "cpus: \"0\""},
		{map[string]string{docker.KeyHTTPPorts: "5-2"}, `http_ports: "5-2" is not a port`},
		{map[string]string{docker.KeyHTTPPorts: "1024-65535"}, "http_ports: at most 4096 ports"},
		{map[string]string{docker.KeyHTTPPorts: " , "}, "http_ports: names no port"},
		{map[string]string{docker.KeyLogLevel: "loud"}, "log_level: \"loud\""},
	} {
		if _, err := docker.ParseSettings(tc.pc); !errors.Is(err, docker.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want ErrConfig with %q", tc.pc, err, tc.want)
		}
	}
}

// TestContainerName: the name depends on pool and key only, is a valid
// container name, and differs between keys and between pools.
func TestContainerName(t *testing.T) {
	a := docker.ContainerName("gpu", "k1")
	if a != docker.ContainerName("gpu", "k1") || a == docker.ContainerName("gpu", "k2") || a == docker.ContainerName("gpu2", "k1") {
		t.Fatalf("names: %s", a)
	}
	long := docker.ContainerName(strings.Repeat("p", 128)+"/x y", "k")
	if len(long) > 70 || strings.ContainsAny(long, "/ ") {
		t.Fatalf("long pool name: %s", long)
	}
}

// TestLibraries: a CGO_ENABLED=0 build needs nothing beyond itself; a
// dynamically linked binary brings its interpreter and libc; a file that
// is not ELF is refused naming the key.
func TestLibraries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "static"), src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if libs, err := docker.Libraries(filepath.Join(dir, "static")); err != nil || len(libs) != 0 {
		t.Errorf("static binary: %v, %v", libs, err)
	}
	libs, err := docker.Libraries("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) == 0 {
		t.Skip("/bin/sh is static here")
	}
	joined := strings.Join(libs, " ")
	if !strings.Contains(joined, "/libc.so") || !strings.Contains(libs[0], "ld-") {
		t.Errorf("/bin/sh needs %v: want its interpreter first and libc", libs)
	}
	if _, err := docker.Libraries(src); !errors.Is(err, docker.ErrConfig) || !strings.Contains(err.Error(), "not an ELF executable") {
		t.Errorf("a text file: %v", err)
	}
}

// TestParseSettingsHostileValues proves the values an API caller writes
// into a docker pool's config cannot slip past the bounds: "NaN" CPUs
// (every comparison with NaN is false, so it passed the 0.01..1024 check
// and became a garbage NanoCPUs) and privileged host ports (the agents
// share the host's network) are refused.
func TestParseSettingsHostileValues(t *testing.T) {
	for _, tc := range []struct {
		pc   map[string]string
		want string
	}{
		{map[string]string{docker.KeyCPUs: "NaN"}, `cpus: "NaN"`},
		{map[string]string{docker.KeyCPUs: "-nan"}, `cpus: "-nan"`},
		{map[string]string{docker.KeyCPUs: "+Inf"}, `cpus: "+Inf"`},
		{map[string]string{docker.KeyHTTPPorts: "22"}, `http_ports: "22" is not a port`},
		{map[string]string{docker.KeyHTTPPorts: "80-90"}, `http_ports: "80-90" is not a port`},
	} {
		if _, err := docker.ParseSettings(tc.pc); !errors.Is(err, docker.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want ErrConfig with %q", tc.pc, err, tc.want)
		}
	}
}
