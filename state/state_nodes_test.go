package state

import (
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

func TestUpsertNode(t *testing.T) {
	s := testStore(t)
	node := statetest.Node(2)
	node.SchedulingEligibility = ""
	must(t, s.UpsertNode(10, node))

	// Changing the input after insert must not change what is stored.
	node.Name = "changed"
	node.Attributes["kernel.name"] = "darwin"
	node.NodeResources.Devices[0].Instances[0].Healthy = false

	got, err := s.NodeByID(nil, node.ID)
	must(t, err)
	if got.Name == "changed" || got.Attributes["kernel.name"] != "linux" || !got.NodeResources.Devices[0].Instances[0].Healthy {
		t.Fatalf("stored node changed with its input: %+v", got)
	}
	if got.CreateIndex != 10 || got.ModifyIndex != 10 || got.SchedulingEligibility != structs.NodeSchedulingEligible {
		t.Fatalf("indexes/eligibility = %d/%d/%q", got.CreateIndex, got.ModifyIndex, got.SchedulingEligibility)
	}
	if idx := mustIndex(t, s, TableNodes); idx != 10 {
		t.Fatalf("nodes index = %d, want 10", idx)
	}

	// Re-registration keeps CreateIndex and the stored eligibility.
	must(t, s.UpdateNodeStatus(11, node.ID, structs.NodeStatusDown, 1234))
	re := got.Copy()
	re.SchedulingEligibility = ""
	re.Status = structs.NodeStatusReady
	must(t, s.UpsertNode(12, re))
	got, err = s.NodeByID(nil, node.ID)
	must(t, err)
	if got.CreateIndex != 10 || got.ModifyIndex != 12 || got.Status != structs.NodeStatusReady {
		t.Fatalf("re-register: create %d modify %d status %s", got.CreateIndex, got.ModifyIndex, got.Status)
	}
	if idx := mustIndex(t, s, TableNodes); idx != 12 {
		t.Fatalf("nodes index = %d, want 12", idx)
	}
}

func TestUpsertNodeInvalid(t *testing.T) {
	malformed := statetest.Node(1)
	malformed.Drivers["broken"] = nil
	malformedGPU := statetest.Node(1)
	malformedGPU.NodeResources.Devices[0].Instances = append(malformedGPU.NodeResources.Devices[0].Instances, nil)
	cases := []struct {
		name string
		node *structs.Node
	}{
		{"nil", nil},
		{"no id", &structs.Node{Name: "x"}},
		{"nil driver", malformed},
		{"nil device instance", malformedGPU},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := testStore(t)
			err := s.UpsertNode(5, c.node)
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if idx := mustIndex(t, s, TableNodes); idx != 0 {
				t.Fatalf("failed write bumped the index to %d", idx)
			}
		})
	}
}

func TestNodeStatusAndDelete(t *testing.T) {
	cases := []struct {
		name    string
		op      func(s *StateStore, id string) error
		wantErr error
		check   func(t *testing.T, s *StateStore, id string)
	}{
		{
			name: "status",
			op:   func(s *StateStore, id string) error { return s.UpdateNodeStatus(20, id, structs.NodeStatusDown, 99) },
			check: func(t *testing.T, s *StateStore, id string) {
				n, err := s.NodeByID(nil, id)
				must(t, err)
				if n.Status != structs.NodeStatusDown || n.StatusUpdatedAt != 99 || n.ModifyIndex != 20 || n.CreateIndex != 1 {
					t.Fatalf("node = %+v", n)
				}
			},
		},
		{
			name: "status of missing node",
			op: func(s *StateStore, id string) error {
				return s.UpdateNodeStatus(20, "missing", structs.NodeStatusDown, 99)
			},
			wantErr: structs.ErrNotFound,
		},
		{
			name: "delete",
			op:   func(s *StateStore, id string) error { return s.DeleteNode(20, id) },
			check: func(t *testing.T, s *StateStore, id string) {
				n, err := s.NodeByID(nil, id)
				if n != nil || err != nil {
					t.Fatalf("deleted node = %v, %v", n, err)
				}
			},
		},
		{
			name:    "delete missing node",
			op:      func(s *StateStore, id string) error { return s.DeleteNode(20, "missing") },
			wantErr: structs.ErrNotFound,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := testStore(t)
			node := statetest.Node(0)
			must(t, s.UpsertNode(1, node))
			err := c.op(s, node.ID)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
				if idx := mustIndex(t, s, TableNodes); idx != 1 {
					t.Fatalf("failed write moved the index to %d", idx)
				}
				return
			}
			must(t, err)
			if idx := mustIndex(t, s, TableNodes); idx != 20 {
				t.Fatalf("nodes index = %d, want 20", idx)
			}
			c.check(t, s, node.ID)
		})
	}
}

func TestNodesSorted(t *testing.T) {
	s := testStore(t)
	for i, id := range []string{"c", "a", "b"} {
		n := statetest.Node(0)
		n.ID = id
		must(t, s.UpsertNode(uint64(i+1), n))
	}
	nodes, err := s.Nodes(nil)
	must(t, err)
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	if len(ids) != 3 || ids[0] != "a" || ids[1] != "b" || ids[2] != "c" {
		t.Fatalf("ids = %v", ids)
	}
	if idx, err := s.LatestIndex(); err != nil || idx != 3 {
		t.Fatalf("latest = %d, %v", idx, err)
	}
}
