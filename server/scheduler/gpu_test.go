package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

const appleM2 = "Apple M2 Ultra"

// unifiedNode returns a ready unified-memory node with hostMiB of memory and
// one apple/gpu whose memory is the host memory less the OS reserve.
func unifiedNode(id string, hostMiB int64) *structs.Node {
	n := gpuNode(id, 0, "", 0)
	n.MemoryModel = structs.MemoryModelUnified
	n.NodeResources.MemoryMB = hostMiB
	n.ReservedResources.MemoryMB = 0
	n.NodeResources.Devices = []*structs.DeviceGroup{{
		Vendor: structs.DeviceVendorApple, Type: structs.DeviceTypeGPU, Name: appleM2,
		Attributes: map[string]*structs.Attribute{"memory": structs.NewIntAttribute(hostMiB-structs.UnifiedOSReserveMiB(hostMiB), "MiB")},
		Instances:  []*structs.DeviceInstance{{ID: "apple-gpu-" + id, Healthy: true}},
	}}
	return n
}

// migNode returns a node whose one GPU has MIG on: only its slices are
// device instances (the parent is not schedulable).
func migNode(id string, slices int) *structs.Node {
	n := gpuNode(id, 0, "", 0)
	g := &structs.DeviceGroup{
		Vendor: structs.DeviceVendorNvidia, Type: structs.DeviceTypeGPU, Name: "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
		Attributes: map[string]*structs.Attribute{"memory": structs.NewIntAttribute(40192, "MiB"), "mig": structs.NewBoolAttribute(true)},
	}
	for i := 0; i < slices; i++ {
		g.Instances = append(g.Instances, &structs.DeviceInstance{ID: fmt.Sprintf("MIG-%s-%d", id, i), Healthy: true})
	}
	n.NodeResources.Devices = []*structs.DeviceGroup{g}
	return n
}

// shareJob returns a job of count allocations each asking for a share of
// mib MiB of one GPU, with task memory taskMiB.
func shareJob(id string, count int, mib, taskMiB int) *structs.Job {
	j := gpuJob(id, structs.JobTypeBatch, count, 1, 100, taskMiB)
	d := j.TaskGroups[0].Tasks[0].Resources.Devices[0]
	d.Name, d.MemoryMB = "gpu", mib
	return j
}

// TestNodeClasses checks availability classes and reserved capabilities,
// and that the reasons are counted per node.
func TestNodeClasses(t *testing.T) {
	nodes := func() []*structs.Node {
		plain := gpuNode("plain", 1, h100, 81559)
		opp := gpuNode("opp", 1, h100, 81559)
		opp.Availability = structs.AvailabilityOpportunistic
		voice := gpuNode("voice", 1, h100, 81559)
		voice.Reserved = []string{"voice"}
		voice2 := gpuNode("voice2", 1, h100, 81559)
		voice2.Reserved = []string{"voice"}
		return []*structs.Node{plain, opp, voice, voice2}
	}
	cases := []struct {
		name      string
		requires  []string
		avail     string
		jobAvail  string
		count     int
		wantNodes []string
		filtered  map[string]int
	}{
		{"default takes only the plain node", nil, "", "", 1, []string{"plain"},
			map[string]int{structs.ReasonOpportunistic: 1, "reserved 'voice'": 2}},
		{"opt in takes opportunistic too", nil, structs.AvailabilityOpportunistic, "", 2, []string{"opp", "plain"},
			map[string]int{"reserved 'voice'": 2}},
		{"job-level opt in", nil, "", structs.AvailabilityOpportunistic, 2, []string{"opp", "plain"},
			map[string]int{"reserved 'voice'": 2}},
		{"continuous demanded over job opt in", nil, structs.AvailabilityContinuous, structs.AvailabilityOpportunistic, 1, []string{"plain"},
			map[string]int{structs.ReasonOpportunistic: 1, "reserved 'voice'": 2}},
		{"voice goes only to voice nodes", []string{"voice"}, "", "", 2, []string{"voice", "voice2"},
			map[string]int{structs.ReasonOpportunistic: 1, "missing capability 'voice'": 1}},
		{"unknown capability fits nowhere", []string{"asr"}, "", "", 0, nil,
			map[string]int{structs.ReasonOpportunistic: 1, "missing capability 'asr'": 1, "reserved 'voice'": 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for _, n := range nodes() {
				h.state.upsertNode(n)
			}
			job := gpuJob("j", structs.JobTypeBatch, 3, 1, 100, 128)
			job.Availability = tc.jobAvail
			job.TaskGroups[0].Requires = tc.requires
			job.TaskGroups[0].Availability = tc.avail
			ev := h.register(job)
			var got []string
			for _, a := range h.state.liveAllocs("j") {
				got = append(got, a.NodeID)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.wantNodes) {
				t.Fatalf("placed on %v, want %v", got, tc.wantNodes)
			}
			if q := ev.QueuedAllocations["g"]; q != 3-tc.count {
				t.Fatalf("queued %d, want %d", q, 3-tc.count)
			}
			m := ev.FailedTGAllocs["g"]
			if m == nil {
				t.Fatal("no failure metric")
			}
			for reason, n := range tc.filtered {
				if m.ConstraintFiltered[reason] != n {
					t.Fatalf("ConstraintFiltered = %v, want %q: %d", m.ConstraintFiltered, reason, n)
				}
			}
			checkInvariants(t, h.state)
		})
	}
}

// TestMemoryShares checks VRAM shares: several allocations share one GPU
// while the sum of shares is within its memory, a share and a whole-GPU
// request never meet on one instance, and the allocation records its
// share.
func TestMemoryShares(t *testing.T) {
	t.Run("shares fill one gpu", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 2, h100, 81559))
		// 20 GiB shares: 3 fit in 81,559 MiB (61,440), a 4th would need 81,920.
		ev := h.register(shareJob("s", 5, 20*1024, 128))
		live := h.state.liveAllocs("s")
		if len(live) != 5 || ev.QueuedAllocations["g"] != 0 {
			t.Fatalf("placed %d, queued %v; want 5 over two GPUs", len(live), ev.QueuedAllocations)
		}
		per := map[string]int{}
		for _, a := range live {
			d := a.AllocatedResources.Tasks["t"].Devices[0]
			if d.MemoryMB != 20*1024 || len(d.DeviceIDs) != 1 {
				t.Fatalf("alloc %s devices %+v, want one GPU with a 20480 MiB share", a.Name, d)
			}
			per[d.DeviceIDs[0]]++
		}
		if len(per) != 2 || max(per["GPU-n-0"], per["GPU-n-1"]) != 3 {
			t.Fatalf("shares per GPU %v, want 3 and 2 (best fit packs one GPU first)", per)
		}
		more := h.register(shareJob("more", 2, 20*1024, 128))
		if more.QueuedAllocations["g"] != 1 || more.FailedTGAllocs["g"].DimensionExhausted["device memory: gpu"] != 1 {
			t.Fatalf("more: queued %v failed %+v, want 1 queued on device memory", more.QueuedAllocations, more.FailedTGAllocs["g"])
		}
		checkInvariants(t, h.state)
	})
	t.Run("whole gpu avoids shared instance", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 2, h100, 81559))
		h.register(shareJob("s", 1, 1024, 128))
		h.register(gpuJob("whole", structs.JobTypeBatch, 2, 1, 100, 128))
		live := h.state.liveAllocs("whole")
		if len(live) != 1 {
			t.Fatalf("whole placed %d, want 1 (the other GPU is shared)", len(live))
		}
		shared := h.state.liveAllocs("s")[0].DeviceIDs()[0]
		if live[0].DeviceIDs()[0] == shared {
			t.Fatalf("whole GPU %s is the shared one", shared)
		}
		// And a share cannot go onto the whole-held GPU, only the shared one.
		h.register(shareJob("s2", 1, 1024, 128))
		if got := h.state.liveAllocs("s2")[0].DeviceIDs()[0]; got != shared {
			t.Fatalf("second share on %s, want the shared %s", got, shared)
		}
		checkInvariants(t, h.state)
	})
	t.Run("share larger than any gpu is filtered", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("n", 2, a10, 24576))
		ev := h.register(shareJob("big", 1, 40*1024, 128))
		if ev.FailedTGAllocs["g"].ConstraintFiltered["missing devices: gpu"] != 1 {
			t.Fatalf("failed %+v", ev.FailedTGAllocs["g"])
		}
	})
}

// TestUnifiedMemory checks that on a unified-memory node a GPU memory
// share is charged to host memory, keeping the OS reserve.
func TestUnifiedMemory(t *testing.T) {
	h := newHarness(t)
	host := int64(64 * 1024)
	h.state.upsertNode(unifiedNode("mac", host))
	usable := host - structs.UnifiedOSReserveMiB(host) // 48 GiB
	// 40 GiB of GPU memory plus 8 GiB for the task fill the usable memory.
	ev := h.register(shareJob("llm", 1, 40*1024, 8*1024))
	if ev.QueuedAllocations["g"] != 0 {
		t.Fatalf("llm queued %v", ev.QueuedAllocations)
	}
	if usable != 48*1024 {
		t.Fatalf("usable %d MiB, want 49152", usable)
	}
	// Any more host memory does not fit, even though the GPU has room.
	small := h.register(shareJob("small", 1, 1024, 0))
	if small.QueuedAllocations["g"] != 1 || small.FailedTGAllocs["g"].DimensionExhausted["memory"] != 1 {
		t.Fatalf("small: queued %v failed %+v, want blocked on memory", small.QueuedAllocations, small.FailedTGAllocs["g"])
	}
	checkInvariants(t, h.state)
	// On a discrete node the same share does not use host memory.
	h2 := newHarness(t)
	d := gpuNode("pc", 1, h100, 81559)
	d.NodeResources.MemoryMB = 8*1024 + 1024
	h2.state.upsertNode(d)
	if ev := h2.register(shareJob("llm", 1, 40*1024, 8*1024)); ev.QueuedAllocations["g"] != 0 {
		t.Fatalf("discrete: queued %v", ev.QueuedAllocations)
	}
}

// gangJob returns a batch job with one gang group of count members each
// asking for gpus GPUs.
func gangJob(id string, count, gpus int) *structs.Job {
	j := gpuJob(id, structs.JobTypeBatch, count, gpus, 100, 128)
	j.TaskGroups[0].Gang = true
	j.TaskGroups[0].RestartPolicy = nil
	j.Canonicalize()
	return j
}

// TestGang checks all-or-nothing placement, ranks and peers, whole-gang
// restarts and their limit.
func TestGang(t *testing.T) {
	t.Run("placed whole with ranks", func(t *testing.T) {
		h := newHarness(t)
		a, b := gpuNode("a", 2, h100, 81559), gpuNode("b", 2, h100, 81559)
		a.HTTPAddr, b.HTTPAddr = "10.0.0.1:4656", "10.0.0.2:4656"
		h.state.upsertNode(a)
		h.state.upsertNode(b)
		job := gangJob("ddp", 4, 1)
		if job.TaskGroups[0].RestartPolicy.Attempts != 0 {
			t.Fatalf("gang restart attempts %d, want 0", job.TaskGroups[0].RestartPolicy.Attempts)
		}
		ev := h.register(job)
		live := h.state.liveAllocs("ddp")
		if len(live) != 4 || ev.QueuedAllocations["g"] != 0 {
			t.Fatalf("placed %d queued %v", len(live), ev.QueuedAllocations)
		}
		local := map[string][]int{}
		for i, al := range live {
			g := al.Gang
			if g == nil || g.Rank != i || g.WorldSize != 4 || len(g.Peers) != 4 || g.MasterPort != structs.GangMasterPort("ddp", "g") {
				t.Fatalf("alloc %s gang %+v", al.Name, g)
			}
			if g.MasterAddr != g.Peers[0] || g.Peers[i] != structs.NodeHost(h.state.nodes[al.NodeID]) {
				t.Fatalf("alloc %s gang %+v on %s", al.Name, g, al.NodeID)
			}
			local[al.NodeID] = append(local[al.NodeID], g.LocalRank)
		}
		for n, ranks := range local {
			if !slices.Equal(ranks, []int{0, 1}) {
				t.Fatalf("node %s local ranks %v", n, ranks)
			}
		}
	})
	t.Run("too big places nothing", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("a", 2, h100, 81559))
		h.state.upsertNode(gpuNode("b", 2, h100, 81559))
		ev := h.register(gangJob("ddp", 5, 1))
		if n := len(h.state.liveAllocs("ddp")); n != 0 || ev.QueuedAllocations["g"] != 5 || ev.BlockedEval == "" {
			t.Fatalf("placed %d queued %v blocked %q; want none placed, 5 queued", n, ev.QueuedAllocations, ev.BlockedEval)
		}
		// Other groups still fit after the rollback.
		if ev := h.register(gpuJob("other", structs.JobTypeBatch, 4, 1, 100, 128)); ev.QueuedAllocations["g"] != 0 {
			t.Fatalf("other queued %v", ev.QueuedAllocations)
		}
	})
	t.Run("refused node refuses the gang", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("a", 2, h100, 81559))
		h.state.upsertNode(gpuNode("b", 2, h100, 81559))
		job := h.state.upsertJob(gangJob("ddp", 4, 1))
		stolen := false
		h.planner.beforeApply = func(plan *structs.Plan) {
			if stolen {
				return
			}
			stolen = true
			// Another scheduler takes a GPU of node b first.
			o := h.state.upsertJob(gpuJob("thief", structs.JobTypeBatch, 1, 1, 100, 128))
			h.state.upsertAlloc(&structs.Allocation{
				ID: structs.GenerateUUID(), Name: "thief.g[0]", JobID: o.ID, Job: o, TaskGroup: "g", NodeID: "b",
				DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning,
				AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{"t": {
					CPU: 100, MemoryMB: 128, Devices: []*structs.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: h100, DeviceIDs: []string{"GPU-b-0"}}},
				}}},
			})
		}
		ev := h.process(newEval(job, structs.EvalTriggerJobRegister))
		if n := len(h.state.liveAllocs("ddp")); n != 0 || ev.QueuedAllocations["g"] != 4 {
			t.Fatalf("placed %d queued %v; want the gang refused whole and queued", n, ev.QueuedAllocations)
		}
		checkInvariants(t, h.state)
	})
	t.Run("meta update in place keeps members and devices", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("a", 4, h100, 81559))
		h.register(gangJob("ddp", 2, 1))
		before := h.state.liveAllocs("ddp")
		upd := h.state.jobs["ddp"].Copy()
		upd.TaskGroups[0].Meta = map[string]string{"run": "2"}
		h.register(upd)
		after := h.state.liveAllocs("ddp")
		if len(after) != 2 {
			t.Fatalf("live %v", names(after))
		}
		for i := range after {
			if after[i].ID != before[i].ID || !slices.Equal(after[i].DeviceIDs(), before[i].DeviceIDs()) || after[i].Gang.Attempt != 0 {
				t.Fatalf("member %d changed: %s %v -> %s %v", i, before[i].ID, before[i].DeviceIDs(), after[i].ID, after[i].DeviceIDs())
			}
			if after[i].Job.TaskGroups[0].Meta["run"] != "2" {
				t.Fatalf("member %d not updated", i)
			}
		}
		// A real change replaces the whole gang with the next attempt.
		big := h.state.jobs["ddp"].Copy()
		big.TaskGroups[0].Tasks[0].Resources.CPU = 200
		h.register(big)
		h.state.setClientStatus(structs.AllocClientStatusComplete, after...)
		h.process(newEval(h.state.jobs["ddp"], structs.EvalTriggerQueuedAllocs))
		now := h.state.liveAllocs("ddp")
		if len(now) != 2 || now[0].Gang.Attempt != 1 || now[0].Gang.Restarts != 0 {
			t.Fatalf("after update: %v", names(now))
		}
		checkInvariants(t, h.state)
	})
	t.Run("member failure restarts all", func(t *testing.T) {
		h := newHarness(t)
		h.state.upsertNode(gpuNode("a", 4, h100, 81559))
		job := h.state.upsertJob(gangJob("ddp", 2, 1))
		h.process(newEval(job, structs.EvalTriggerJobRegister))
		for attempt := 1; attempt <= structs.GangMaxRestarts+1; attempt++ {
			live := h.state.liveAllocs("ddp")
			if len(live) != 2 {
				t.Fatalf("attempt %d: %d live members", attempt, len(live))
			}
			h.state.setClientStatus(structs.AllocClientStatusFailed, live[1])
			h.process(newEval(job, "alloc-failure"))
			if got := h.state.liveAllocs("ddp"); attempt <= structs.GangMaxRestarts {
				// The survivor is stopped; the new gang waits for its GPU
				// only if the node is full, which it is not.
				if len(got) != 2 || got[0].Gang.Attempt != attempt || got[0].ID == live[0].ID {
					t.Fatalf("attempt %d: live %v", attempt, names(got))
				}
				if old := h.state.allocs[live[0].ID]; old.DesiredStatus != structs.AllocDesiredStatusStop || old.DesiredDescription != descGangRestart {
					t.Fatalf("survivor %s desired %q (%s)", old.Name, old.DesiredStatus, old.DesiredDescription)
				}
				h.state.setClientStatus(structs.AllocClientStatusComplete, live[0])
			} else if len(got) != 0 {
				t.Fatalf("after %d restarts the gang still runs: %v", structs.GangMaxRestarts, names(got))
			}
			checkInvariants(t, h.state)
		}
	})
}

// TestPreemption checks that a job that does not fit evicts lower-priority
// batch allocations, that the evicted job gets an evaluation, that the new
// job is placed once the evicted allocations stop, and what is never
// preempted.
func TestPreemption(t *testing.T) {
	cases := []struct {
		name                string
		lowType             string
		lowPrio, highPrio   int
		wantEvicted         int
		lowCount, highCount int
	}{
		{"batch 40 below", structs.JobTypeBatch, 30, 70, 1, 2, 1},
		{"two evictions for two GPUs", structs.JobTypeBatch, 30, 70, 2, 2, 2},
		{"within 10 is safe", structs.JobTypeBatch, 61, 70, 0, 2, 1},
		{"service never preempted", structs.JobTypeService, 10, 90, 0, 2, 1},
		{"lower priority never preempts", structs.JobTypeBatch, 70, 30, 0, 2, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.state.upsertNode(gpuNode("n", 2, h100, 81559))
			low := gpuJob("low", tc.lowType, tc.lowCount, 1, 100, 128)
			low.Priority = tc.lowPrio
			h.register(low)
			high := gpuJob("high", structs.JobTypeBatch, tc.highCount, 1, 100, 128)
			high.Priority = tc.highPrio
			ev := h.register(high)
			if ev.QueuedAllocations["g"] != tc.highCount {
				t.Fatalf("high queued %v", ev.QueuedAllocations)
			}
			evicted := 0
			for _, a := range h.state.byJob["low"] {
				if a.DesiredStatus == structs.AllocDesiredStatusEvict {
					evicted++
				}
			}
			if evicted != tc.wantEvicted {
				t.Fatalf("evicted %d, want %d", evicted, tc.wantEvicted)
			}
			why := ev.FailedTGAllocs["g"].Explanation
			if want := fmt.Sprintf("(%d preempted now)", tc.wantEvicted); (tc.wantEvicted > 0) != strings.Contains(why, want) {
				t.Fatalf("explanation %q, want it to say %q: %v", why, want, tc.wantEvicted > 0)
			}
			var requeue []*structs.Evaluation
			for _, e := range h.planner.created {
				if e.TriggeredBy == structs.EvalTriggerPreemption {
					requeue = append(requeue, e)
				}
			}
			if (tc.wantEvicted > 0) != (len(requeue) == 1) || (len(requeue) == 1 && requeue[0].JobID != "low") {
				t.Fatalf("preemption evals %+v", requeue)
			}
			checkInvariants(t, h.state)
			if tc.wantEvicted == 0 {
				return
			}
			// The evicted job is requeued: nothing fits while the evicted
			// allocations still hold their GPUs, and a second look does not
			// evict more.
			h.process(requeue[0])
			if again := h.process(h.planner.evals[ev.BlockedEval]); again.Status != structs.EvalStatusBlocked {
				t.Fatalf("high placed before the evicted allocations stopped: %+v", again)
			}
			evictedNow := 0
			for _, a := range h.state.byJob["low"] {
				if a.DesiredStatus == structs.AllocDesiredStatusEvict {
					evictedNow++
				}
			}
			if evictedNow != tc.wantEvicted {
				t.Fatalf("evicted %d after a second look, want still %d", evictedNow, tc.wantEvicted)
			}
			var gone []*structs.Allocation
			for _, a := range h.state.byJob["low"] {
				if a.DesiredStatus == structs.AllocDesiredStatusEvict {
					gone = append(gone, a)
				}
			}
			h.state.setClientStatus(structs.AllocClientStatusComplete, gone...)
			// The evicted job, evaluated first (another worker may take
			// it first), must not take what was evicted for "high".
			h.process(requeue[0])
			for _, a := range h.state.liveAllocs("low") {
				for _, g := range gone {
					if slices.Contains(a.DeviceIDs(), g.DeviceIDs()[0]) {
						t.Fatalf("low took GPU %s reserved for high", g.DeviceIDs()[0])
					}
				}
			}
			done := h.process(h.planner.evals[ev.BlockedEval])
			if done.Status != structs.EvalStatusComplete || len(h.state.liveAllocs("high")) != tc.highCount {
				t.Fatalf("high after eviction: %+v, live %v", done, names(h.state.liveAllocs("high")))
			}
			checkInvariants(t, h.state)
		})
	}
}
