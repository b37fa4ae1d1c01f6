package server_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// endpointServiceJob is statetest.Job with its group turned into 2
// members of endpoint name on port 9000.
func endpointServiceJob(id, name string) *structs.Job {
	j := statetest.Job()
	j.ID, j.Name = id, id
	tg := j.TaskGroups[0]
	tg.Count = 2
	tg.Networks = []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}}}}
	tg.Endpoint = &structs.Endpoint{Name: name, Port: 9000, Model: "m"}
	return j
}

// TestServer_EndpointNameConflict: a job may not declare an endpoint name
// another live job of its namespace declares; the refusal wraps
// structs.ErrEndpointConflict (HTTP 409), not ErrInvalid, names the other
// job and commits nothing. The job itself may be registered again, and
// once the other job is stopped the name is free.
func TestServer_EndpointNameConflict(t *testing.T) {
	s := servertest.NewServer(t)
	if _, err := s.JobRegister(ctxT(t), endpointServiceJob("a", "llm-70b")); err != nil {
		t.Fatal(err)
	}
	b := endpointServiceJob("b", "llm-70b")
	_, err := s.JobRegister(ctxT(t), b)
	want := `group "web": endpoint: name: "llm-70b" is already declared by live job "a" (group "web") in namespace "default"`
	if !errors.Is(err, structs.ErrEndpointConflict) || errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("register b: %v, want a conflict naming job a", err)
	}
	if got, _, err := s.JobGet(ctxT(t), "b", nil); err == nil && got != nil {
		t.Fatalf("job b was stored: %+v", got)
	}
	if _, err := s.JobPlan(ctxT(t), b); !errors.Is(err, structs.ErrEndpointConflict) {
		t.Fatalf("plan b: %v, want a conflict", err)
	}
	// A different name, and job a again with its own name, are fine.
	if _, err := s.JobRegister(ctxT(t), endpointServiceJob("c", "llm-8b")); err != nil {
		t.Fatalf("register c: %v", err)
	}
	again := endpointServiceJob("a", "llm-70b")
	again.TaskGroups[0].Count = 3
	if _, err := s.JobRegister(ctxT(t), again); err != nil {
		t.Fatalf("register a again: %v", err)
	}
	// Stopped, job a no longer holds the name.
	if _, err := s.JobDeregister(ctxT(t), "a", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobRegister(ctxT(t), b); err != nil {
		t.Fatalf("register b after a stopped: %v", err)
	}
	// And now a cannot start again under the name b holds.
	if _, err := s.JobRegister(ctxT(t), endpointServiceJob("a", "llm-70b")); !errors.Is(err, structs.ErrEndpointConflict) {
		t.Fatalf("register a after b took the name: %v", err)
	}
}

// TestServer_EndpointJobPlan: `job plan` shows why an endpoint's members
// do not fit on one node, and that a changed endpoint block replaces
// every member (a destructive update) on their node.
func TestServer_EndpointJobPlan(t *testing.T) {
	s := servertest.NewServer(t)
	registerNode(t, s, 0)
	registerNode(t, s, 0)
	big := endpointServiceJob("serve", "llm-70b")
	big.TaskGroups[0].Count = 3
	big.TaskGroups[0].Tasks[0].Resources.CPU = 6000 // two fit on a node, three do not
	resp, err := s.JobPlan(ctxT(t), big)
	if err != nil {
		t.Fatal(err)
	}
	g := resp.Groups[0]
	if g.Place != 0 || g.Queued != 3 || g.Failure == nil ||
		!strings.Contains(g.Failure.Explanation, "endpoint llm-70b: no node fits all 3 members: 2 nodes: not enough free CPU") {
		t.Fatalf("plan of 3: %+v failure %+v", g, g.Failure)
	}
	job := endpointServiceJob("serve", "llm-70b")
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	allocs := runningAllocs(t, s, job.ID, 2)
	if allocs[0].NodeID != allocs[1].NodeID {
		t.Fatalf("members on %s and %s", allocs[0].NodeID, allocs[1].NodeID)
	}
	changed := endpointServiceJob("serve", "llm-70b")
	changed.TaskGroups[0].Endpoint.Port = 9001
	resp, err = s.JobPlan(ctxT(t), changed)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(resp.Diff, `~ TaskGroups["web"].Endpoint.Port: 9000 => 9001`) {
		t.Fatalf("diff %q", resp.Diff)
	}
	g = resp.Groups[0]
	if g.Stop != 2 || g.Place != 2 || g.InPlace != 0 || len(g.Nodes) != 1 {
		t.Fatalf("changed endpoint: %+v", g)
	}
}
