package server

import (
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// BenchmarkSelectGC times the leader's choice of what to collect
// (selectGC) on a state of 1,000 nodes and 2,000 batch jobs of 50
// finished allocations each (100,000 allocations), a day old: half the
// jobs are purged (their allocations and evaluations go), half are live
// (their allocations are kept for the scheduler). It reports the
// allocations chosen per run and the time per allocation examined.
func BenchmarkSelectGC(b *testing.B) {
	const nodes, jobs, perJob = 1000, 2000, 50
	s, err := state.NewStateStore()
	if err != nil {
		b.Fatal(err)
	}
	var idx uint64
	next := func() uint64 { idx++; return idx }
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	old := time.Now().Add(-24 * time.Hour).UnixNano()
	ns := make([]*structs.Node, nodes)
	for i := range ns {
		ns[i] = statetest.Node(0)
		must(s.UpsertNode(next(), ns[i]))
	}
	for j := 0; j < jobs; j++ {
		job := statetest.BatchJob(0)
		job.SubmitTime = old
		must(s.UpsertJob(next(), job))
		stored, err := s.JobByID(nil, job.ID)
		must(err)
		e := statetest.Eval(job)
		e.Status, e.CreateTime, e.ModifyTime = structs.EvalStatusComplete, old, old
		must(s.UpsertEvals(next(), []*structs.Evaluation{e}))
		placed := make([]*structs.Allocation, perJob)
		done := make([]*structs.Allocation, perJob)
		for k := range placed {
			a := statetest.Alloc(stored, ns[(j*perJob+k)%nodes])
			a.EvalID = e.ID
			placed[k] = a
			done[k] = &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusComplete}
		}
		must(s.UpsertPlanResults(next(), &structs.ApplyPlanResultsRequest{AllocsPlaced: placed, UpdatedAt: old}))
		must(s.UpdateAllocsFromClient(next(), done, old))
		if j%2 == 0 {
			must(s.DeleteJob(next(), job.ID))
		}
	}
	snap, err := s.Snapshot()
	must(err)
	th := GCConfig{}.withDefaults().thresholds()
	now := time.Now().UnixNano()
	b.ReportAllocs()
	b.ResetTimer()
	var w *gcWork
	for i := 0; i < b.N; i++ {
		if w, err = selectGC(snap, now, th); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if got, want := len(w.allocs), jobs/2*perJob; got != want {
		b.Fatalf("chose %d allocations, want %d (those of the purged jobs)", got, want)
	}
	b.ReportMetric(float64(len(w.allocs)), "allocs_chosen")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(jobs*perJob), "ns/alloc")
}
