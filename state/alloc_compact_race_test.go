package state

import (
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// exitReport is a client's status report for a: its task dead with the
// given exit code in a small Details map, as every client of a fleet
// sends alike.
func exitReport(a *structs.Allocation, exit string) *structs.Allocation {
	task := a.Job.TaskGroups[0].Tasks[0].Name
	return &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusComplete, TaskStates: map[string]*structs.TaskState{
		task: {State: structs.TaskStateDead, Events: []*structs.TaskEvent{{Type: structs.TaskEventTerminated, Time: 1,
			Details: map[string]string{"exit_code": exit}}}}}}
}

// TestCompactedAllocsShareNothingMutable (hostile17; run with -race):
// stored allocations share interned strings and small Details maps
// (alloc_compact.go). While readers walk every stored allocation (its
// task states, event details, allocated devices) and change their own
// Copy of each as a careless caller would, client updates, in-place plan
// updates, job updates and a snapshot restore of the same allocations
// into a second store run. The race detector must see no write to
// anything two allocations or two stores share, and at the end each
// allocation holds what was last written for it, not another's.
func TestCompactedAllocsShareNothingMutable(t *testing.T) {
	s := testStore(t)
	node := statetest.Node(2)
	must(t, s.UpsertNode(1, node))
	job := statetest.BatchJob(1)
	must(t, s.UpsertJob(2, job))
	job = mustJob(t, s, job.ID)
	const n = 8
	placed := make([]*structs.Allocation, n)
	for i := range placed {
		placed[i] = statetest.Alloc(job, node)
	}
	must(t, s.UpsertPlanResults(3, &structs.ApplyPlanResultsRequest{AllocsPlaced: placed, Job: job}))
	var reports []*structs.Allocation
	for _, a := range placed {
		reports = append(reports, exitReport(mustAlloc(t, s, a.ID), "0"))
	}
	must(t, s.UpdateAllocsFromClient(4, reports, 1))
	task := job.TaskGroups[0].Tasks[0].Name
	details := func(st *StateStore, id string) map[string]string {
		a, err := st.AllocByID(nil, id)
		if err != nil || a == nil {
			t.Fatalf("alloc %s: %v", id, err)
		}
		return a.TaskStates[task].Events[0].Details
	}
	// The attack needs the sharing: equal reports share one map.
	if reflect.ValueOf(details(s, placed[0].ID)).UnsafePointer() != reflect.ValueOf(details(s, placed[1].ID)).UnsafePointer() {
		t.Fatal("equal Details maps of two allocations are not shared; the test attacks nothing")
	}

	restored := testStore(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	read := func(st *StateStore) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			allocs, err := st.Allocs(nil)
			if err != nil {
				t.Error(err)
				return
			}
			for _, a := range allocs {
				for name, ts := range a.TaskStates {
					for _, e := range ts.Events {
						for k, v := range e.Details {
							_ = name + e.Type + k + v
						}
					}
				}
				if a.AllocatedResources != nil {
					for name, tr := range a.AllocatedResources.Tasks {
						for _, d := range tr.Devices {
							_ = name + d.Vendor + d.Name
						}
					}
				}
				// A caller's copy is its own to change.
				c := a.Copy()
				for _, ts := range c.TaskStates {
					for _, e := range ts.Events {
						if e.Details != nil {
							e.Details["reader"] = "changed"
						}
					}
					ts.Events = append(ts.Events, &structs.TaskEvent{Type: "Reader"})
				}
				if c.AllocatedResources != nil {
					for _, tr := range c.AllocatedResources.Tasks {
						for _, d := range tr.Devices {
							d.Name = "changed"
						}
					}
				}
			}
		}
	}
	wg.Add(2)
	go read(s)
	go read(restored)

	index := uint64(10)
	last := map[string]string{}
	for _, a := range placed {
		last[a.ID] = "0"
	}
	for round := range 40 {
		index++
		// Half the fleet reports a new exit code, the other half the
		// code it has (shared with the first half's old one).
		var reports []*structs.Allocation
		for i, a := range placed {
			exit := "0"
			if i%2 == 0 {
				exit = strconv.Itoa(round % 3)
			}
			last[a.ID] = exit
			reports = append(reports, exitReport(a.Copy(), exit))
		}
		for _, r := range reports {
			r.TaskStates[task].Events[0].Details["exit_code"] = last[r.ID]
		}
		if err := s.UpdateAllocsFromClient(index, reports, int64(index)); err != nil {
			t.Fatal(err)
		}
		// The odd ones are updated in place by a plan (new description),
		// keeping their task states.
		index++
		var upd []*structs.Allocation
		for i, a := range placed {
			if i%2 == 1 {
				c := mustAlloc(t, s, a.ID).Copy()
				c.DesiredDescription = "round " + strconv.Itoa(round)
				upd = append(upd, c)
			}
		}
		must(t, s.UpsertPlanResults(index, &structs.ApplyPlanResultsRequest{AllocsPlaced: upd, Job: job}))
		// A job update (a new version of the same job).
		index++
		j := job.Copy()
		j.Meta = map[string]string{"round": strconv.Itoa(round)}
		must(t, s.UpsertJob(index, j))
		// A follower restoring a snapshot: each stored allocation as
		// decoded from the snapshot (its own copy), into the other store.
		if round%8 == 0 {
			r, err := restored.Restore()
			must(t, err)
			allocs, err := s.Allocs(nil)
			must(t, err)
			for _, a := range allocs {
				b, err := structs.Encode(structs.AllocClientUpdateRequestType, a)
				must(t, err)
				var dec structs.Allocation
				must(t, structs.Decode(b[1:], &dec))
				must(t, r.AllocRestore(&dec))
			}
			must(t, r.Commit())
		}
	}
	close(stop)
	wg.Wait()
	for _, a := range placed {
		want := map[string]string{"exit_code": last[a.ID]}
		if got := details(s, a.ID); !reflect.DeepEqual(got, want) {
			t.Errorf("alloc %s details %v, want %v", a.ID, got, want)
		}
		if got := mustAlloc(t, s, a.ID).AllocatedResources.Tasks[task].Devices[0].Name; got == "changed" {
			t.Errorf("alloc %s: a reader's change to its copy reached the stored device", a.ID)
		}
	}
	for _, a := range placed[:1] {
		if got := details(restored, a.ID); got["reader"] != "" {
			t.Errorf("restored alloc %s details %v: a reader's change reached it", a.ID, got)
		}
	}
}
