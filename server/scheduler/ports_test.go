package scheduler

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

func portJob(id string, count int, nw *structs.NetworkResource) *structs.Job {
	j := gpuJob(id, structs.JobTypeService, count, 0, 100, 100)
	j.TaskGroups[0].Networks = []*structs.NetworkResource{nw}
	return j
}

// TestPortsDynamicDistinct: dynamic ports are taken from the node's range
// and no two allocations on a node share a host port, across jobs too.
func TestPortsDynamicDistinct(t *testing.T) {
	h := newHarness(t)
	n := gpuNode("n1", 0, "", 0)
	n.NodeResources.MinDynamicPort, n.NodeResources.MaxDynamicPort = 21000, 21009
	h.state.upsertNode(n)
	nw := &structs.NetworkResource{DynamicPorts: []structs.Port{{Label: "http", To: 8000}, {Label: "admin"}}}
	h.register(portJob("a", 3, nw))
	h.register(portJob("b", 2, nw))
	seen := map[int]string{}
	for _, a := range h.state.allocs {
		sh := a.AllocatedResources.Shared
		if sh == nil || len(sh.Ports) != 2 {
			t.Fatalf("alloc %s ports %+v", a.Name, sh)
		}
		for _, p := range sh.Ports {
			if p.Value < 21000 || p.Value > 21009 {
				t.Fatalf("port %d outside the node's range", p.Value)
			}
			if prev, dup := seen[p.Value]; dup {
				t.Fatalf("port %d given to %s and %s", p.Value, prev, a.Name)
			}
			seen[p.Value] = a.Name
			if p.Label == "http" && p.To != 8000 {
				t.Fatalf("http to = %d", p.To)
			}
		}
	}
	// Ten ports, all taken: the next allocation does not fit.
	ev := h.register(portJob("c", 1, nw))
	m := ev.FailedTGAllocs["g"]
	if m == nil || m.DimensionExhausted[dimDynamicPorts] != 1 {
		t.Fatalf("want a dynamic port failure, got %+v", m)
	}
	checkInvariants(t, h.state)
}

// TestPortsStaticCollision: a static port in use on a node makes the
// node unfit, naming the port; another node takes the allocation.
func TestPortsStaticCollision(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(gpuNode("n1", 0, "", 0))
	nw := &structs.NetworkResource{ReservedPorts: []structs.Port{{Label: "http", Value: 8080}}}
	h.register(portJob("a", 1, nw))
	ev := h.register(portJob("b", 1, nw))
	m := ev.FailedTGAllocs["g"]
	if m == nil {
		t.Fatalf("second static 8080 placed on the same node")
	}
	found := false
	for dim := range m.DimensionExhausted {
		found = found || strings.Contains(dim, "reserved port collision http=8080")
	}
	if !found {
		t.Fatalf("dimensions %v", m.DimensionExhausted)
	}
	h.state.upsertNode(gpuNode("n2", 0, "", 0))
	h.register(portJob("c", 1, nw))
	if got := len(h.state.liveAllocs("c")); got != 1 {
		t.Fatalf("c placed %d allocations", got)
	}
}

// TestPortsNodeReserved: a node's reserved ports are never given, static
// or dynamic.
func TestPortsNodeReserved(t *testing.T) {
	h := newHarness(t)
	n := gpuNode("n1", 0, "", 0)
	n.NodeResources.MinDynamicPort, n.NodeResources.MaxDynamicPort = 21000, 21003
	n.ReservedResources.Networks.ReservedHostPorts = "8080,21000-21002"
	h.state.upsertNode(n)
	h.register(portJob("a", 1, &structs.NetworkResource{DynamicPorts: []structs.Port{{Label: "http"}}}))
	allocs := h.state.liveAllocs("a")
	if len(allocs) != 1 || allocs[0].AllocatedResources.Shared.Ports[0].Value != 21003 {
		t.Fatalf("allocs %+v", allocs)
	}
	// The range is now full, and the static port is reserved.
	ev := h.register(portJob("b", 1, &structs.NetworkResource{DynamicPorts: []structs.Port{{Label: "http"}}}))
	if m := ev.FailedTGAllocs["g"]; m == nil || m.DimensionExhausted[dimDynamicPorts] != 1 {
		t.Fatalf("dynamic with a full range: %+v", ev.FailedTGAllocs)
	}
	ev = h.register(portJob("c", 1, &structs.NetworkResource{ReservedPorts: []structs.Port{{Label: "http", Value: 8080}}}))
	if m := ev.FailedTGAllocs["g"]; m == nil {
		t.Fatal("a reserved static port was given")
	}
}
