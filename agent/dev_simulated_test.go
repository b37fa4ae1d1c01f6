package agent_test

import (
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/structs"
)

// TestDevAgentDeclaredGPUsReplaceDefaults (issue 11 item 11) starts a dev
// agent whose config declares one simulated GPU: its node reports that GPU
// and not the two default simulated GPUs of dev mode.
func TestDevAgentDeclaredGPUsReplaceDefaults(t *testing.T) {
	cfg := agent.DevConfig()
	cfg.Name = "dev-declared"
	cfg.Client.SimulatedGPUs = []*agent.SimulatedGPUConfig{{Count: 1, Model: "NVIDIA L4", Memory: 23034}}
	a := startAgent(t, cfg)
	url := "http://" + a.HTTPAddr()
	var nodes []*api.Node
	waittest.For(t, 20*time.Second, "the dev node registered", func() (bool, string) {
		nodes = nil
		if err := getJSON(url+"/v1/nodes", &nodes); err != nil {
			return false, err.Error()
		}
		return len(nodes) == 1 && nodes[0].Status == structs.NodeStatusReady, fmt.Sprintf("%d nodes", len(nodes))
	})
	var node api.Node
	if err := getJSON(url+"/v1/node/"+nodes[0].ID, &node); err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, g := range node.NodeResources.Devices {
		if g.Name == devices.SimulatedName {
			t.Fatalf("node has the default simulated GPUs (%d) beside the declared one: %+v", len(g.Instances), node.NodeResources.Devices)
		}
		if g.Name == "NVIDIA L4" {
			declared += len(g.Instances)
		}
	}
	if declared != 1 {
		t.Fatalf("node has %d declared L4 GPUs, want 1: %+v", declared, node.NodeResources.Devices)
	}
}
