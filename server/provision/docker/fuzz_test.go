package docker_test

import (
	"testing"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/server/provision/docker"
	"github.com/gpulayer/gpulayer/structs"
)

// FuzzAgentConfig renders the container agent's config from arbitrary
// request strings: whatever the provider accepts must parse with the
// agent's parser and give back every value unchanged (no HCL template or
// quote in a value changes the config).
func FuzzAgentConfig(f *testing.F) {
	f.Add("node-1", "a100", "tok", "NVIDIA A100", "127.0.0.1:4656")
	f.Add(`n"}`+"\n"+`acl{`, "${x}", "%{ if }", `\\`, `http://[::1]:4656`)
	f.Fuzz(func(t *testing.T, name, class, token, model, server string) {
		req := provision.CreateRequest{
			Pool: "gpu", IdempotencyKey: "k", NodeName: name,
			Shape: structs.NodeShape{NodeClass: class, GPUModel: model, GPUCount: 1},
			Join:  provision.JoinInfo{Servers: []string{server}, Token: token},
		}
		if docker.CheckRequest(req) != nil {
			return
		}
		s, err := docker.ParseSettings(nil)
		if err != nil {
			t.Fatal(err)
		}
		src, err := docker.AgentConfig(req, s, 4700)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := agent.ParseConfig("agent.hcl", src)
		if err != nil {
			t.Fatalf("config for %+v does not parse: %v\n%s", req, err, src)
		}
		c := cfg.Client
		if cfg.Name != name || c.NodeClass != class || cfg.ACLToken() != token || len(c.Servers) != 1 || c.Servers[0] != server ||
			len(c.SimulatedGPUs) != 1 || c.SimulatedGPUs[0].Model != model || c.NodePool != "gpu" {
			t.Fatalf("values changed:\n%s", src)
		}
	})
}

// FuzzParseSettings: the provider config parser never panics, and ports
// it accepts are valid, distinct and within the bound.
func FuzzParseSettings(f *testing.F) {
	for _, s := range []string{"4700-4799", "1,2,3", "5-2", "0", "65535", "1-65535", " , ", "10-20,15-25"} {
		f.Add(s, "1024", "0.5")
		f.Add(s, "1024", "NaN")
	}
	f.Fuzz(func(t *testing.T, ports, mem, cpus string) {
		s, err := docker.ParseSettings(map[string]string{docker.KeyHTTPPorts: ports, docker.KeyMemoryMB: mem, docker.KeyCPUs: cpus})
		if err != nil {
			return
		}
		if len(s.HTTPPorts) == 0 || len(s.HTTPPorts) > 4096 || s.MemoryMB < 64 || s.NanoCPUs < 10_000_000 || s.NanoCPUs > 1024_000_000_000 {
			t.Fatalf("accepted %+v", s)
		}
		for i, p := range s.HTTPPorts {
			if p < 1024 || p > 65535 || i > 0 && p <= s.HTTPPorts[i-1] {
				t.Fatalf("ports %v", s.HTTPPorts)
			}
		}
	})
}
