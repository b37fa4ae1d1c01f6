package server

import (
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/server/scheduler"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// BenchmarkNomadServiceScheduler does the work of Nomad's
// BenchmarkServiceScheduler (scheduler/benchmarks/benchmarks_test.go in
// hashicorp/nomad, its "no spread" cases: GPUlayer has no spread block)
// with GPUlayer's scheduler, so that its placements/s can be set beside
// Nomad's:
//
//   - nodes of Nomad's mock.Node() shape as that benchmark rewrites them:
//     4 cores of 3,500 MHz (14,000 MHz), 32,000 MiB, the mock's reserved
//     100 MHz and 256 MiB, the exec driver (here native), datacenters dc-1
//     and dc-2 in turn, meta.rack = "r<i mod 25>", on 5,000 and 10,000
//     nodes in the real go-memdb state store;
//   - one service job of 1,200 allocations of 6,000 MHz and 6,000 MiB in
//     dc-1 and dc-2 and no constraint (Nomad's generateJob empties the
//     mock job's constraints), so CPU binds: 2 allocations a node;
//   - the evaluation is processed against a state store snapshot, and the
//     plan is verified by the plan applier's own check (evaluatePlan:
//     structs.AllocsFit on every node of the plan against the newest
//     state) and not committed, as Nomad's benchmark does not commit it
//     either.
//
// The "12_of_25_racks" cases add the constraint that
// BenchmarkNomadShapedService (server/scheduler, on its map-based fake
// state, the fast-path figure) uses: meta.rack in r0-r11. It reports
// placements per second of wall time; `make bench` prints it with its
// ratio to the fast-path figure.
func BenchmarkNomadServiceScheduler(b *testing.B) {
	for _, size := range []int{5000, 10000} {
		for _, racks := range []int{25, 12} {
			name := fmt.Sprintf("%d_nodes_25_racks_1200_allocs", size)
			if racks == 12 {
				name = fmt.Sprintf("%d_nodes_12_of_25_racks_1200_allocs", size)
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				store, job := nomadBenchState(b, size, racks == 12)
				placed := 0
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					snap, err := store.Snapshot()
					if err != nil {
						b.Fatal(err)
					}
					p := &verifyOnlyPlanner{snap: snap}
					sched, err := scheduler.New(job.Type, &schedState{snap: snap}, p)
					if err != nil {
						b.Fatal(err)
					}
					ev := &structs.Evaluation{ID: structs.GenerateUUID(), Namespace: job.Namespace, Priority: job.Priority,
						Type: job.Type, TriggeredBy: structs.EvalTriggerJobRegister, JobID: job.ID,
						JobModifyIndex: job.JobModifyIndex, Status: structs.EvalStatusPending}
					if err := sched.Process(ev); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					placed += p.check(b, snap, racks == 12)
					b.StartTimer()
				}
				b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
			})
		}
	}
}

// nomadBenchState returns a state store holding size nodes of Nomad's mock
// node shape and the 1,200-allocation service job; rackConstrained adds
// the r0-r11 constraint.
func nomadBenchState(b *testing.B, size int, rackConstrained bool) (*state.StateStore, *structs.Job) {
	b.Helper()
	store, err := state.NewStateStore()
	if err != nil {
		b.Fatal(err)
	}
	index := uint64(1)
	for i := 0; i < size; i++ {
		index++
		n := &structs.Node{
			ID: structs.GenerateUUID(), SecretID: structs.GenerateUUID(), Name: "foobar",
			Datacenter: []string{"dc-1", "dc-2"}[i%2], NodeClass: "linux-medium-pci",
			Attributes: map[string]string{"kernel.name": "linux", "cpu.arch": "x86", "driver.native": "1"},
			Meta:       map[string]string{"rack": fmt.Sprintf("r%d", i%25)},
			Drivers:    map[string]*structs.DriverInfo{"native": {Detected: true, Healthy: true}},
			NodeResources: &structs.NodeResources{
				CPU: 4 * 3500, Cores: 4, MemoryMB: 32000,
			},
			ReservedResources:     &structs.NodeReservedResources{CPU: 100, MemoryMB: 256},
			Status:                structs.NodeStatusReady,
			SchedulingEligibility: structs.NodeSchedulingEligible,
		}
		if err := store.UpsertNode(index, n); err != nil {
			b.Fatal(err)
		}
	}
	job := &structs.Job{
		ID: "mock-service-" + structs.GenerateUUID(), Name: "my-job", Type: structs.JobTypeService, Priority: 50,
		Datacenters: []string{"dc-1", "dc-2"},
		TaskGroups: []*structs.TaskGroup{{Name: "web", Count: 1200, Tasks: []*structs.Task{{
			Name: "web", Driver: "native", Config: map[string]interface{}{"command": "/bin/date"},
			Env:       map[string]string{"FOO": "bar"},
			Resources: &structs.Resources{CPU: 6000, MemoryMB: 6000},
		}}}},
	}
	if rackConstrained {
		job.Constraints = []*structs.Constraint{{LTarget: "${meta.rack}", Operand: "regexp", RTarget: "^r([0-9]|1[01])$"}}
	}
	job.Canonicalize()
	index++
	if err := store.UpsertJob(index, job); err != nil {
		b.Fatal(err)
	}
	stored, err := store.JobByID(nil, job.ID)
	if err != nil || stored == nil {
		b.Fatalf("job not stored: %v", err)
	}
	return store, stored
}

// verifyOnlyPlanner verifies each plan with the plan applier's check
// (evaluatePlan) against the snapshot and returns the result without
// committing it.
type verifyOnlyPlanner struct {
	snap   *state.StateSnapshot
	result *structs.PlanResult
	plans  int
	final  *structs.Evaluation
}

func (p *verifyOnlyPlanner) SubmitPlan(plan *structs.Plan) (*structs.PlanResult, scheduler.State, error) {
	p.plans++
	res, err := evaluatePlan(p.snap, plan, hclog.NewNullLogger())
	if err != nil {
		return nil, nil, err
	}
	p.result = res
	if res.RefreshIndex != 0 {
		return res, &schedState{snap: p.snap}, nil
	}
	return res, nil, nil
}

func (p *verifyOnlyPlanner) UpdateEval(eval *structs.Evaluation) error { p.final = eval; return nil }
func (p *verifyOnlyPlanner) CreateEval(*structs.Evaluation) error      { return nil }

// check fails the benchmark unless one plan placed all 1,200 allocations,
// the applier's check refused no node, the evaluation completed with none
// queued, and (rackConstrained) every placement is on racks r0-r11. It
// returns the number placed.
func (p *verifyOnlyPlanner) check(b *testing.B, snap *state.StateSnapshot, rackConstrained bool) int {
	b.Helper()
	if p.plans != 1 || p.result == nil || len(p.result.RejectedNodes) != 0 {
		b.Fatalf("plans %d, result %+v", p.plans, p.result)
	}
	if p.final == nil || p.final.Status != structs.EvalStatusComplete || p.final.QueuedAllocations["web"] != 0 {
		b.Fatalf("evaluation ended %+v", p.final)
	}
	placed := 0
	for nodeID, allocs := range p.result.NodeAllocation {
		placed += len(allocs)
		if len(allocs) > 2 {
			b.Fatalf("node %s got %d allocations; 14,000 MHz holds 2 of 6,000", nodeID, len(allocs))
		}
		if rackConstrained {
			n, err := snap.NodeByID(nil, nodeID)
			if err != nil || n == nil {
				b.Fatalf("node %s: %v", nodeID, err)
			}
			var rack int
			if _, err := fmt.Sscanf(n.Meta["rack"], "r%d", &rack); err != nil || rack > 11 {
				b.Fatalf("placed on rack %q, outside r0-r11", n.Meta["rack"])
			}
		}
	}
	if placed != 1200 {
		b.Fatalf("placed %d allocations, want 1200", placed)
	}
	return placed
}
