package state

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

func testPool(name string) *structs.NodePool {
	return &structs.NodePool{Name: name, Description: "gpu hosts", Meta: map[string]string{"team": "ml"},
		Scaling: &structs.PoolScalingPolicy{Provider: structs.PoolProviderDocker, Min: 0, Max: 4,
			ProviderConfig: map[string]string{"image": "gpulayer:dev"}, Cooldown: 30 * time.Second, IdleAfter: 2 * time.Minute,
			Shape: structs.NodeShape{NodeClass: "a100", GPUCount: 1, GPUMemoryMB: 81920, MemoryModel: "discrete", Availability: "continuous"},
			Idle:  structs.PoolIdleRule{NoAllocations: true, GPUUtilBelowPercent: 5, GPUUtilFor: 10 * time.Minute}}}
}

func poolNames(pools []*structs.NodePool) []string {
	var out []string
	for _, p := range pools {
		out = append(out, p.Name)
	}
	return out
}

func TestNodePoolsBuiltinsExistUnwritten(t *testing.T) {
	s := testStore(t)
	pools, err := s.NodePools(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := poolNames(pools); len(got) != 2 || got[0] != "all" || got[1] != "default" {
		t.Fatalf("pools = %v, want [all default]", got)
	}
	for _, name := range []string{"default", "all"} {
		p, err := s.NodePoolByName(nil, name)
		if err != nil || p == nil || p.Name != name || p.Description == "" {
			t.Fatalf("NodePoolByName(%q) = %+v, %v", name, p, err)
		}
	}
	if p, err := s.NodePoolByName(nil, "gpu"); err != nil || p != nil {
		t.Fatalf("unknown pool = %+v, %v", p, err)
	}
	if rows, _ := s.NodePoolRows(nil); len(rows) != 0 {
		t.Fatalf("rows = %v, want none written", poolNames(rows))
	}
}

func TestUpsertNodePools(t *testing.T) {
	s := testStore(t)
	if err := s.UpsertNodePools(5, []*structs.NodePool{testPool("gpu")}); err != nil {
		t.Fatal(err)
	}
	p, _ := s.NodePoolByName(nil, "gpu")
	if p == nil || p.CreateIndex != 5 || p.ModifyIndex != 5 || p.Scaling == nil || p.Scaling.Max != 4 {
		t.Fatalf("pool = %+v", p)
	}
	if idx := mustIndex(t, s, TableNodePools); idx != 5 {
		t.Fatalf("table index = %d", idx)
	}
	// Unchanged: not written again.
	if err := s.UpsertNodePools(6, []*structs.NodePool{testPool("gpu")}); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.NodePoolByName(nil, "gpu"); p.ModifyIndex != 5 {
		t.Fatalf("unchanged pool rewritten: ModifyIndex %d", p.ModifyIndex)
	}
	// Changed: keeps CreateIndex; the input is copied.
	in := testPool("gpu")
	in.Scaling.Max = 8
	if err := s.UpsertNodePools(7, []*structs.NodePool{in}); err != nil {
		t.Fatal(err)
	}
	in.Scaling.Max = 99
	in.Meta["team"] = "changed"
	p, _ = s.NodePoolByName(nil, "gpu")
	if p.CreateIndex != 5 || p.ModifyIndex != 7 || p.Scaling.Max != 8 || p.Meta["team"] != "ml" {
		t.Fatalf("pool = %+v scaling %+v", p, p.Scaling)
	}
	// "default" may be written; it then shows its row.
	if err := s.UpsertNodePools(8, []*structs.NodePool{{Name: "default", Description: "mine"}}); err != nil {
		t.Fatal(err)
	}
	pools, _ := s.NodePools(nil)
	if got := poolNames(pools); len(got) != 3 || got[1] != "default" || pools[1].Description != "mine" {
		t.Fatalf("pools = %v", got)
	}
}

func TestUpsertNodePoolsRefused(t *testing.T) {
	bad := testPool("x")
	bad.Scaling.Min, bad.Scaling.Max = 5, 2
	cases := map[string][]*structs.NodePool{
		"all":            {{Name: "all", Description: "x"}},
		"nil":            {nil},
		"bad name":       {{Name: "a b"}},
		"twice":          {{Name: "a"}, {Name: "a"}},
		"min > max":      {bad},
		"one bad of two": {testPool("ok"), {Name: "ok2", Scaling: &structs.PoolScalingPolicy{Provider: "aws", Max: 1}}},
	}
	for name, pools := range cases {
		t.Run(name, func(t *testing.T) {
			s := testStore(t)
			if err := s.UpsertNodePools(3, pools); !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if rows, _ := s.NodePoolRows(nil); len(rows) != 0 || mustIndex(t, s, TableNodePools) != 0 {
				t.Fatalf("a refused upsert wrote %v", poolNames(rows))
			}
		})
	}
}

func TestDeleteNodePools(t *testing.T) {
	s := testStore(t)
	if err := s.UpsertNodePools(2, []*structs.NodePool{testPool("gpu"), testPool("cpu")}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"default", "all"} {
		if err := s.DeleteNodePools(3, []string{name}); !errors.Is(err, structs.ErrInvalid) {
			t.Fatalf("delete %q: err = %v, want ErrInvalid", name, err)
		}
	}
	if err := s.DeleteNodePools(3, []string{"cpu", "nope"}); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("delete unknown: err = %v", err)
	}
	if p, _ := s.NodePoolByName(nil, "cpu"); p == nil {
		t.Fatal("a refused delete removed cpu (not all or none)")
	}
	if err := s.DeleteNodePools(4, []string{"cpu"}); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.NodePoolByName(nil, "cpu"); p != nil || mustIndex(t, s, TableNodePools) != 4 {
		t.Fatalf("cpu still there: %+v", p)
	}
}

func TestDeleteNodePoolRefusedWhileUsed(t *testing.T) {
	s := testStore(t)
	if err := s.UpsertNodePools(2, []*structs.NodePool{testPool("gpu")}); err != nil {
		t.Fatal(err)
	}
	node := statetest.Node(1)
	node.NodePool = "gpu"
	if err := s.UpsertNode(3, node); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNodePools(4, []string{"gpu"}); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "stop their agents") {
		t.Fatalf("delete with a node in it: err = %v", err)
	}
	// A down node (a scaled-in host's) is there until the node GC: the
	// refusal says so.
	downNode := node.Copy()
	downNode.Status = structs.NodeStatusDown
	if err := s.UpsertNode(5, downNode); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNodePools(5, []string{"gpu"}); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "gpulayer system gc") {
		t.Fatalf("delete with a down node in it: err = %v", err)
	}
	if err := s.DeleteNode(5, node.ID); err != nil {
		t.Fatal(err)
	}
	job := statetest.BatchJob(1)
	job.NodePool = "gpu"
	if err := s.UpsertJob(6, job); err != nil {
		t.Fatal(err)
	}
	if j := mustJob(t, s, job.ID); j.Status == structs.JobStatusDead {
		t.Fatalf("fixture job is dead already")
	}
	if err := s.DeleteNodePools(7, []string{"gpu"}); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("delete with a live job in it: err = %v", err)
	}
	jobs, _ := s.JobsByNodePool(nil, "gpu")
	if len(jobs) != 1 || jobs[0].ID != job.ID {
		t.Fatalf("jobs in gpu = %v", jobs)
	}
	stopped := job.Copy()
	stopped.Stop = true
	if err := s.UpsertJob(8, stopped); err != nil {
		t.Fatal(err)
	}
	if j := mustJob(t, s, job.ID); j.Status != structs.JobStatusDead {
		t.Fatalf("stopped job status = %q", j.Status)
	}
	if err := s.DeleteNodePools(9, []string{"gpu"}); err != nil {
		t.Fatalf("delete with only a dead job: %v", err)
	}
}

func TestNodeRegistersIntoPool(t *testing.T) {
	s := testStore(t)
	a, b, c := statetest.Node(0), statetest.Node(0), statetest.Node(0)
	a.NodePool = "gpu"
	c.NodePool = "default"
	for i, n := range []*structs.Node{a, b, c} {
		if err := s.UpsertNode(uint64(10+i), n); err != nil {
			t.Fatal(err)
		}
	}
	// A node naming an unwritten pool creates it, as Nomad does.
	p, _ := s.NodePoolByName(nil, "gpu")
	if p == nil || p.CreateIndex != 10 {
		t.Fatalf("implicit pool = %+v", p)
	}
	check := func(pool string, want ...string) {
		t.Helper()
		nodes, err := s.NodesByNodePool(nil, pool)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, n := range nodes {
			got[n.ID] = true
		}
		if len(nodes) != len(want) {
			t.Fatalf("%s: %d nodes, want %d", pool, len(nodes), len(want))
		}
		for _, id := range want {
			if !got[id] {
				t.Fatalf("%s: node %s missing", pool, id)
			}
		}
	}
	check("gpu", a.ID)
	check("default", b.ID, c.ID)
	check("all", a.ID, b.ID, c.ID)
	check("nope")
	bad := statetest.Node(0)
	bad.NodePool = "all"
	if err := s.UpsertNode(20, bad); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("node in all: err = %v", err)
	}
	bad.NodePool = "bad name!"
	if err := s.UpsertNode(21, bad); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("node with bad pool name: err = %v", err)
	}
}
