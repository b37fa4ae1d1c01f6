package scheduler

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

const (
	h100 = "NVIDIA H100 80GB HBM3"
	a10  = "NVIDIA A10"
)

func TestNew(t *testing.T) {
	s := newFakeState()
	p := newFakePlanner(s)
	cases := []struct {
		name    string
		typ     string
		state   State
		planner Planner
		wantErr bool
	}{
		{"batch", structs.JobTypeBatch, s, p, false},
		{"service", structs.JobTypeService, s, p, false},
		{"system is not supported", "system", s, p, true},
		{"nil state", structs.JobTypeBatch, nil, p, true},
		{"nil planner", structs.JobTypeBatch, s, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sched, err := New(tc.typ, tc.state, tc.planner)
			if tc.wantErr {
				if !errors.Is(err, structs.ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || sched == nil {
				t.Fatalf("New = %v, %v", sched, err)
			}
		})
	}
}

// TestRandomWorkloadInvariants registers 1,000 random GPU jobs on 50 mixed
// nodes, stopping random jobs along the way to make room and reprocessing
// blocked evaluations, and checks after every evaluation that no device
// instance is held twice and no node is over-committed.
func TestRandomWorkloadInvariants(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(42, 7))
	totalGPUs := 0
	for i := 0; i < 50; i++ {
		gpus := 4
		if i%2 == 0 {
			gpus = 8
		}
		totalGPUs += gpus
		h.state.upsertNode(gpuNode(fmt.Sprintf("node-%02d", i), gpus, h100, 81559))
	}
	var running []string
	var blocked []*structs.Evaluation
	// stopping holds the jobs stopped last round: their clients report the
	// allocations complete one round late, so stopped allocations keep
	// holding their GPUs for a while.
	var stopping []string
	placed, queuedSeen, unblocked := 0, 0, 0
	for i := 0; i < 1000; i++ {
		typ := structs.JobTypeBatch
		if rng.IntN(2) == 0 {
			typ = structs.JobTypeService
		}
		job := gpuJob(fmt.Sprintf("job-%04d", i), typ, 1+rng.IntN(3), 1+rng.IntN(4), 500+rng.IntN(4000), 1024+rng.IntN(32*1024))
		ev := h.register(job)
		checkInvariants(t, h.state)
		if ev.BlockedEval != "" {
			queuedSeen++
			blocked = append(blocked, h.planner.evals[ev.BlockedEval])
		}
		for _, a := range h.state.liveAllocs(job.ID) {
			placed++
			if got, want := len(a.DeviceIDs()), job.TaskGroups[0].Tasks[0].Resources.Devices[0].Count; got != want {
				t.Fatalf("alloc %s holds %d devices, want %d", a.Name, got, want)
			}
		}
		running = append(running, job.ID)
		// Batch allocations finish on their own now and then.
		if k := rng.IntN(len(running)); h.state.jobs[running[k]].Type == structs.JobTypeBatch {
			h.state.setClientStatus(structs.AllocClientStatusComplete, h.state.liveAllocs(running[k])...)
		}
		// Stop a random job about half the time, let the clients of the
		// jobs stopped before finish, and retry up to 8 blocked
		// evaluations, oldest first, as the server's tracker would.
		if rng.IntN(2) == 0 && len(running) > 0 {
			for _, id := range stopping {
				h.state.setClientStatus(structs.AllocClientStatusComplete, h.state.byJob[id]...)
			}
			k := rng.IntN(len(running))
			id := running[k]
			running = append(running[:k], running[k+1:]...)
			h.stop(id)
			checkInvariants(t, h.state)
			stopping = []string{id}
			var still []*structs.Evaluation
			for j, b := range blocked {
				if j >= 8 {
					still = append(still, b)
					continue
				}
				got := h.process(b)
				checkInvariants(t, h.state)
				if got.Status == structs.EvalStatusBlocked {
					still = append(still, got)
				} else {
					unblocked++
				}
			}
			blocked = still
		}
	}
	if placed == 0 || queuedSeen == 0 || unblocked == 0 {
		t.Fatalf("workload too easy or impossible: placed %d, blocked %d, unblocked %d (total GPUs %d)", placed, queuedSeen, unblocked, totalGPUs)
	}
	t.Logf("placed %d allocations at registration, %d evaluations blocked, %d unblocked later", placed, queuedSeen, unblocked)
}

// TestBlockedUntilRoom checks that a group that cannot fit stays queued with
// an explanation and a blocked evaluation, and is placed once another job
// stops and its allocations finish.
func TestBlockedUntilRoom(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(gpuNode("n1", 4, h100, 81559))
	h.state.upsertNode(gpuNode("n2", 4, h100, 81559))

	first := h.register(gpuJob("small", structs.JobTypeService, 2, 3, 1000, 1024))
	if first.Status != structs.EvalStatusComplete || first.BlockedEval != "" {
		t.Fatalf("small: status %q blocked %q", first.Status, first.BlockedEval)
	}
	big := h.register(gpuJob("big", structs.JobTypeBatch, 1, 4, 1000, 1024))
	if big.Status != structs.EvalStatusComplete {
		t.Fatalf("big: status %q, want complete", big.Status)
	}
	if big.QueuedAllocations["g"] != 1 {
		t.Fatalf("big: queued %v, want g=1", big.QueuedAllocations)
	}
	m := big.FailedTGAllocs["g"]
	if m == nil || m.NodesEvaluated != 2 || m.NodesExhausted != 2 || m.DimensionExhausted["devices: nvidia/gpu"] != 2 {
		t.Fatalf("big: FailedTGAllocs = %+v", m)
	}
	if len(h.planner.created) != 1 {
		t.Fatalf("created %d evals, want 1 blocked eval", len(h.planner.created))
	}
	b := h.planner.created[0]
	if b.ID != big.BlockedEval || b.Status != structs.EvalStatusBlocked || b.TriggeredBy != structs.EvalTriggerQueuedAllocs ||
		b.PreviousEval != big.ID || b.JobID != "big" || b.Type != structs.JobTypeBatch {
		t.Fatalf("blocked eval = %+v", b)
	}

	// Still no room: reprocessing re-blocks without a new evaluation.
	again := h.process(b)
	if again.Status != structs.EvalStatusBlocked || len(h.planner.created) != 1 {
		t.Fatalf("reprocessed while full: status %q, created %d", again.Status, len(h.planner.created))
	}

	// Stopping does not free devices until the client reports.
	h.stop("small")
	if got := h.process(b); got.Status != structs.EvalStatusBlocked {
		t.Fatalf("after stop before client: status %q, want blocked", got.Status)
	}
	h.state.setClientStatus(structs.AllocClientStatusComplete, h.state.byJob["small"]...)
	done := h.process(b)
	if done.Status != structs.EvalStatusComplete || len(done.FailedTGAllocs) != 0 || done.QueuedAllocations["g"] != 0 {
		t.Fatalf("after room: %+v", done)
	}
	live := h.state.liveAllocs("big")
	if len(live) != 1 || len(live[0].DeviceIDs()) != 4 {
		t.Fatalf("big live allocs = %v", live)
	}
	if len(h.planner.created) != 1 {
		t.Fatalf("created %d evals, want still 1", len(h.planner.created))
	}
	checkInvariants(t, h.state)
}

// TestConstraintsFilterNodes checks node and device constraints.
func TestConstraintsFilterNodes(t *testing.T) {
	mkNodes := func() []*structs.Node {
		a := gpuNode("a-80g", 2, h100, 81559)
		a.NodeClass = "train"
		a.Meta["rack"] = "r1"
		a.Attributes["cpu.features"] = "avx,avx2,avx512"
		b := gpuNode("b-24g", 2, a10, 24576)
		b.Attributes["kernel.name"] = "darwin"
		b.Attributes["cpu.features"] = "avx,avx2"
		c := gpuNode("c-24g", 2, a10, 24576)
		c.NodeClass = "infer"
		c.Meta["rack"] = "r2"
		return []*structs.Node{a, b, c}
	}
	cases := []struct {
		name      string
		job       func(j *structs.Job)
		wantNodes []string
		reason    string // a ConstraintFiltered key expected on failure
	}{
		{"kernel linux", func(j *structs.Job) {
			j.Constraints = []*structs.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}}
		}, []string{"a-80g", "c-24g"}, ""},
		{"node class", func(j *structs.Job) {
			j.TaskGroups[0].Constraints = []*structs.Constraint{{LTarget: "${node.class}", Operand: "==", RTarget: "infer"}}
		}, []string{"c-24g"}, ""},
		{"device memory >= 40 GiB", func(j *structs.Job) {
			j.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints = []*structs.Constraint{{LTarget: "${device.attr.memory}", Operand: ">=", RTarget: "40 GiB"}}
		}, []string{"a-80g"}, ""},
		{"device model regexp", func(j *structs.Job) {
			j.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints = []*structs.Constraint{{LTarget: "${device.model}", Operand: "regexp", RTarget: "A10$"}}
		}, []string{"b-24g", "c-24g"}, ""},
		{"regexp on node name", func(j *structs.Job) {
			j.Constraints = []*structs.Constraint{{LTarget: "${node.name}", Operand: "regexp", RTarget: "^name-[ab]"}}
		}, []string{"a-80g", "b-24g"}, ""},
		{"set_contains", func(j *structs.Job) {
			j.Constraints = []*structs.Constraint{{LTarget: "${attr.cpu.features}", Operand: "set_contains", RTarget: "avx2, avx512"}}
		}, []string{"a-80g"}, ""},
		{"is_set meta", func(j *structs.Job) {
			j.Constraints = []*structs.Constraint{{LTarget: "${meta.rack}", Operand: "is_set"}}
		}, []string{"a-80g", "c-24g"}, ""},
		{"is_not_set meta", func(j *structs.Job) {
			j.Constraints = []*structs.Constraint{{LTarget: "${meta.rack}", Operand: "is_not_set"}}
		}, []string{"b-24g"}, ""},
		{"task constraint !=", func(j *structs.Job) {
			j.TaskGroups[0].Tasks[0].Constraints = []*structs.Constraint{{LTarget: "${node.id}", Operand: "!=", RTarget: "a-80g"}}
		}, []string{"b-24g", "c-24g"}, ""},
		{"numeric attribute", func(j *structs.Job) {
			j.Constraints = []*structs.Constraint{{LTarget: "${attr.cpu.numcores}", Operand: ">", RTarget: "16"}}
		}, []string{"a-80g", "b-24g", "c-24g"}, ""},
		{"nothing matches", func(j *structs.Job) {
			j.Constraints = []*structs.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "windows"}}
		}, nil, "${attr.kernel.name} = windows"},
		{"device constraint unmet everywhere", func(j *structs.Job) {
			j.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints = []*structs.Constraint{{LTarget: "${device.attr.memory}", Operand: ">=", RTarget: "100 GiB"}}
		}, nil, "missing devices: nvidia/gpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for _, n := range mkNodes() {
				h.state.upsertNode(n)
			}
			// Every node has 2 GPUs: one more allocation than the
			// matching nodes hold must fill each of them and queue one.
			job := gpuJob("j", structs.JobTypeService, 2*len(tc.wantNodes)+1, 1, 100, 128)
			tc.job(job)
			ev := h.register(job)
			got := map[string]int{}
			for _, a := range h.state.liveAllocs("j") {
				got[a.NodeID]++
			}
			for _, n := range tc.wantNodes {
				if got[n] != 2 {
					t.Errorf("%d allocations on %s, want 2; got %v", got[n], n, got)
				}
			}
			if len(got) != len(tc.wantNodes) {
				t.Errorf("allocations on %v, want only %v", got, tc.wantNodes)
			}
			m := ev.FailedTGAllocs["g"]
			if m == nil || m.NodesFiltered != 3-len(tc.wantNodes) || m.NodesExhausted != len(tc.wantNodes) || ev.QueuedAllocations["g"] != 1 {
				t.Fatalf("FailedTGAllocs = %+v, queued %v", m, ev.QueuedAllocations)
			}
			if tc.reason != "" && m.ConstraintFiltered[tc.reason] != 3 {
				t.Fatalf("ConstraintFiltered = %v, want 3 × %q", m.ConstraintFiltered, tc.reason)
			}
		})
	}
}

// TestFeasibility checks the checks that are not user constraints.
func TestFeasibility(t *testing.T) {
	cases := []struct {
		name   string
		modify func(n *structs.Node, j *structs.Job)
		reason string
	}{
		{"driver missing", func(n *structs.Node, j *structs.Job) { delete(n.Drivers, "native") }, `missing driver "native"`},
		{"driver unhealthy", func(n *structs.Node, j *structs.Job) { n.Drivers["native"].Healthy = false }, `missing driver "native"`},
		{"node down", func(n *structs.Node, j *structs.Job) { n.Status = structs.NodeStatusDown }, "node down"},
		{"node ineligible", func(n *structs.Node, j *structs.Job) {
			n.SchedulingEligibility = structs.NodeSchedulingIneligible
		}, "node ineligible"},
		{"datacenter", func(n *structs.Node, j *structs.Job) { j.Datacenters = []string{"dc2"} }, reasonDatacenter},
		{"no gpus", func(n *structs.Node, j *structs.Job) { n.NodeResources.Devices = nil }, "missing devices: nvidia/gpu"},
		{"unhealthy gpu", func(n *structs.Node, j *structs.Job) {
			n.NodeResources.Devices[0].Instances[0].Healthy = false
			j.TaskGroups[0].Tasks[0].Resources.Devices[0].Count = 2
		}, "missing devices: nvidia/gpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			bad := gpuNode("bad", 2, h100, 81559)
			job := gpuJob("j", structs.JobTypeService, 1, 1, 100, 128)
			tc.modify(bad, job)
			h.state.upsertNode(bad)
			ev := h.register(job)
			if n := len(h.state.liveAllocs("j")); n != 0 {
				t.Fatalf("placed %d allocations on an unfit node", n)
			}
			m := ev.FailedTGAllocs["g"]
			if m == nil || m.ConstraintFiltered[tc.reason] != 1 || m.NodesFiltered != 1 {
				t.Fatalf("FailedTGAllocs = %+v, want %q", m, tc.reason)
			}
			// A good node makes the job placeable.
			h.state.upsertNode(gpuNode("good", 2, h100, 81559))
			if j := h.state.jobs["j"]; j.Datacenters[0] == "dc2" {
				n := h.state.nodes["good"].Copy()
				n.Datacenter = "dc2"
				h.state.upsertNode(n)
			}
			ev = h.process(h.planner.evals[ev.BlockedEval])
			live := h.state.liveAllocs("j")
			if ev.Status != structs.EvalStatusComplete || len(live) != 1 || live[0].NodeID != "good" {
				t.Fatalf("after adding a good node: status %q, allocs %v", ev.Status, live)
			}
		})
	}
}

func TestCapacityDimensions(t *testing.T) {
	cases := []struct {
		name          string
		cpu, mem, gpu int
		dim           string
	}{
		{"cpu", 40000, 128, 1, "cpu"},
		{"memory", 100, 300 * 1024, 1, "memory"},
		{"devices", 100, 128, 3, "devices: nvidia/gpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.state.upsertNode(gpuNode("n", 4, h100, 81559))
			h.register(gpuJob("filler", structs.JobTypeService, 1, 2, 100, 128))
			ev := h.register(gpuJob("j", structs.JobTypeService, 1, tc.gpu, tc.cpu, tc.mem))
			m := ev.FailedTGAllocs["g"]
			if m == nil || m.NodesExhausted != 1 || m.DimensionExhausted[tc.dim] != 1 {
				t.Fatalf("FailedTGAllocs = %+v, want %q exhausted", m, tc.dim)
			}
		})
	}
}

// TestDistinctDevicesAcrossTasks checks that two tasks asking two GPUs each
// on a 4-GPU node get four distinct instances.
func TestDistinctDevicesAcrossTasks(t *testing.T) {
	h := newHarness(t)
	h.state.upsertNode(gpuNode("n", 4, h100, 81559))
	job := gpuJob("j", structs.JobTypeBatch, 1, 2, 100, 128)
	t2 := job.TaskGroups[0].Tasks[0].Copy()
	t2.Name = "t2"
	job.TaskGroups[0].Tasks = append(job.TaskGroups[0].Tasks, t2)
	h.register(job)
	live := h.state.liveAllocs("j")
	if len(live) != 1 {
		t.Fatalf("placed %d allocations, want 1", len(live))
	}
	ids := live[0].DeviceIDs()
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	if len(ids) != 4 || len(seen) != 4 {
		t.Fatalf("device IDs %v, want 4 distinct", ids)
	}
	for _, task := range []string{"t", "t2"} {
		tr := live[0].AllocatedResources.Tasks[task]
		if len(tr.Devices) != 1 || len(tr.Devices[0].DeviceIDs) != 2 || tr.Devices[0].Name != h100 || tr.CPU != 100 || tr.MemoryMB != 128 {
			t.Fatalf("task %s resources = %+v", task, tr)
		}
	}
	checkInvariants(t, h.state)
}

func TestLifecycle(t *testing.T) {
	t.Run("stopping a job stops its allocations", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 8, h100, 81559))
		h.register(gpuJob("j", structs.JobTypeService, 3, 1, 100, 128))
		ev := h.stop("j")
		if ev.Status != structs.EvalStatusComplete {
			t.Fatalf("status %q", ev.Status)
		}
		for _, a := range h.state.byJob["j"] {
			if a.DesiredStatus != structs.AllocDesiredStatusStop || a.DesiredDescription != descJobStopped {
				t.Fatalf("alloc %s desired %q %q", a.Name, a.DesiredStatus, a.DesiredDescription)
			}
		}
	})
	t.Run("purged job stops its allocations", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 8, h100, 81559))
		ev := h.register(gpuJob("j", structs.JobTypeService, 2, 1, 100, 128))
		delete(h.state.jobs, "j")
		h.process(&structs.Evaluation{ID: structs.GenerateUUID(), Type: ev.Type, JobID: "j", Status: structs.EvalStatusPending})
		if n := len(h.state.liveAllocs("j")); n != 0 {
			t.Fatalf("%d allocations still live", n)
		}
	})
	t.Run("count decrease stops the highest indexes", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 8, h100, 81559))
		job := gpuJob("j", structs.JobTypeService, 4, 1, 100, 128)
		h.register(job)
		before := map[string]string{}
		for _, a := range h.state.liveAllocs("j") {
			before[a.Name] = a.ID
		}
		job.TaskGroups[0].Count = 2
		h.register(job)
		live := h.state.liveAllocs("j")
		if len(live) != 2 || live[0].Name != "j.g[0]" || live[1].Name != "j.g[1]" {
			t.Fatalf("live = %v", names(live))
		}
		for _, a := range live {
			if before[a.Name] != a.ID {
				t.Fatalf("%s was replaced although only the count changed", a.Name)
			}
		}
	})
	t.Run("completed batch allocation is not placed again", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 8, h100, 81559))
		job := gpuJob("j", structs.JobTypeBatch, 2, 1, 100, 128)
		j := h.state.upsertJob(job)
		h.process(newEval(j, structs.EvalTriggerJobRegister))
		h.state.setClientStatus(structs.AllocClientStatusComplete, h.state.liveAllocs("j")[0])
		h.state.setClientStatus(structs.AllocClientStatusFailed, h.state.liveAllocs("j")[0])
		ev := h.process(newEval(j, structs.EvalTriggerNodeUpdate))
		if n := len(h.state.byJob["j"]); n != 2 {
			t.Fatalf("job has %d allocations, want the 2 originals", n)
		}
		if ev.QueuedAllocations["g"] != 0 || ev.BlockedEval != "" {
			t.Fatalf("eval = %+v", ev)
		}
	})
	t.Run("lost batch allocation is replaced", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 8, h100, 81559))
		j := h.state.upsertJob(gpuJob("j", structs.JobTypeBatch, 1, 1, 100, 128))
		h.process(newEval(j, structs.EvalTriggerJobRegister))
		lost := h.state.liveAllocs("j")[0]
		h.state.setClientStatus(structs.AllocClientStatusLost, lost)
		h.process(newEval(j, structs.EvalTriggerNodeUpdate))
		live := h.state.liveAllocs("j")
		if len(live) != 1 || live[0].PreviousAllocation != lost.ID {
			t.Fatalf("live = %v", live)
		}
	})
	t.Run("failed service allocation is replaced", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 8, h100, 81559))
		job := gpuJob("j", structs.JobTypeService, 2, 1, 100, 128)
		// No delay: the default (30 s) is tested in reschedule_default_test.go.
		job.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Unlimited: true}
		j := h.state.upsertJob(job)
		h.process(newEval(j, structs.EvalTriggerJobRegister))
		failed := h.state.liveAllocs("j")[1]
		h.state.setClientStatus(structs.AllocClientStatusFailed, failed)
		h.process(newEval(j, structs.EvalTriggerNodeUpdate))
		live := h.state.liveAllocs("j")
		if len(live) != 2 || live[1].Name != failed.Name || live[1].PreviousAllocation != failed.ID {
			t.Fatalf("live = %v", names(live))
		}
		checkInvariants(t, h.state)
	})
	t.Run("spec change replaces destructively", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 8, h100, 81559))
		job := gpuJob("j", structs.JobTypeService, 2, 1, 100, 128)
		h.register(job)
		old := h.state.liveAllocs("j")
		job.TaskGroups[0].Tasks[0].Resources.CPU = 200
		h.register(job)
		live := h.state.liveAllocs("j")
		if len(live) != 2 {
			t.Fatalf("live = %v", names(live))
		}
		for i, a := range live {
			if a.ID == old[i].ID || a.PreviousAllocation != old[i].ID || a.AllocatedResources.Tasks["t"].CPU != 200 {
				t.Fatalf("%s not replaced: %+v", a.Name, a)
			}
			if h.state.allocs[old[i].ID].DesiredDescription != descUpdating {
				t.Fatalf("old alloc description %q", h.state.allocs[old[i].ID].DesiredDescription)
			}
		}
		checkInvariants(t, h.state)
	})
	t.Run("meta change updates in place", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 8, h100, 81559))
		job := gpuJob("j", structs.JobTypeService, 2, 1, 100, 128)
		h.register(job)
		old := h.state.liveAllocs("j")
		job.Meta = map[string]string{"owner": "ml"}
		job.TaskGroups[0].Tasks[0].Meta = map[string]string{"x": "y"}
		h.register(job)
		live := h.state.liveAllocs("j")
		cur := h.state.jobs["j"]
		for i, a := range live {
			if a.ID != old[i].ID || a.Job.JobModifyIndex != cur.JobModifyIndex ||
				strings.Join(a.DeviceIDs(), ",") != strings.Join(old[i].DeviceIDs(), ",") {
				t.Fatalf("%s not updated in place", a.Name)
			}
		}
		checkInvariants(t, h.state)
	})
	t.Run("removed group is stopped", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 8, h100, 81559))
		job := gpuJob("j", structs.JobTypeService, 1, 1, 100, 128)
		h.register(job)
		job.TaskGroups[0].Name = "other"
		h.register(job)
		live := h.state.liveAllocs("j")
		if len(live) != 1 || live[0].TaskGroup != "other" {
			t.Fatalf("live = %v", names(live))
		}
	})
}

func names(allocs []*structs.Allocation) []string {
	out := make([]string, len(allocs))
	for i, a := range allocs {
		out[i] = a.Name + "@" + a.NodeID
	}
	return out
}
