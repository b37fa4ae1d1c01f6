package http

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// TestAPIClientRoundTrip drives the handler with the nomadish/api client:
// the wire types must decode what the handler encodes from structs.
func TestAPIClientRoundTrip(t *testing.T) {
	fs, _, ts := fixture(t)
	fs.allocs["a1b2c3d4-0000"].AllocatedResources = &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
		"main": {CPU: 500, MemoryMB: 256, Devices: []*structs.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "H100", DeviceIDs: []string{"GPU-1"}}}},
	}}
	fs.nodes["node-1"].NodeResources = &structs.NodeResources{CPU: 1000, MemoryMB: 2048, Devices: []*structs.DeviceGroup{{
		Vendor: "nvidia", Type: "gpu", Name: "H100", Attributes: map[string]*structs.Attribute{"memory": structs.NewIntAttribute(81559, "MiB")},
		Instances: []*structs.DeviceInstance{{ID: "GPU-1", Healthy: true}},
	}}}
	c, err := api.NewClient(&api.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	job := &api.Job{ID: "j2", Type: "batch", TaskGroups: []*api.TaskGroup{{Name: "g", Count: 1, Tasks: []*api.Task{{Name: "t", Driver: "native"}}}}}
	resp, wm, err := c.Jobs().Register(job, nil)
	if err != nil || resp.EvalID != "eval-j2" || wm.LastIndex != 7 {
		t.Fatalf("register: %+v %+v %v", resp, wm, err)
	}
	jobs, qm, err := c.Jobs().List(&api.QueryOptions{Prefix: "hello"})
	if err != nil || len(jobs) != 1 || qm.LastIndex != 42 || !qm.KnownLeader {
		t.Fatalf("list: %v %+v %v", jobs, qm, err)
	}
	alloc, _, err := c.Allocations().Info("a1b2c3d4-0000", nil)
	if err != nil {
		t.Fatal(err)
	}
	devs := alloc.AllocatedResources.Tasks["main"].Devices
	if len(devs) != 1 || devs[0].ID() != "nvidia/gpu/H100" || devs[0].DeviceIDs[0] != "GPU-1" || alloc.Job.ID != "hello-gpu" {
		t.Fatalf("alloc devices %+v job %+v", devs, alloc.Job)
	}
	node, _, err := c.Nodes().Info("node-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := node.NodeResources.Devices[0].Attributes["memory"].Text(); got != "81559 MiB" {
		t.Errorf("memory attribute = %q", got)
	}
	if _, _, err := c.Evaluations().Info("nope", nil); !api.IsNotFound(err) {
		t.Errorf("missing eval err = %v, want 404", err)
	}
	var se *api.StatusError
	if _, _, err := c.Jobs().Deregister("nope", false, nil); !errors.As(err, &se) || se.Code != 404 {
		t.Errorf("deregister missing: %v", err)
	}
	if _, err := c.Jobs().Parse("job {"); !errors.As(err, &se) || se.Code != 400 {
		t.Errorf("parse bad HCL: %v", err)
	}
	rc, err := c.AllocFS().Logs(context.Background(), "a1b2c3d4-0000", "main", api.LogTypeStdout, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, err := io.ReadAll(rc); err != nil || string(b) != "hello\n" {
		t.Errorf("logs = %q, %v", b, err)
	}
	if l, err := c.Status().Leader(); err != nil || l != "127.0.0.1:4657" {
		t.Errorf("leader = %q, %v", l, err)
	}
}
