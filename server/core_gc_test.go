package server

import (
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// gcNow is the collection time of the selection tests.
var gcNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixNano()

func ago(d time.Duration) int64 { return gcNow - int64(d) }

// defaultTh are the default thresholds.
var defaultTh = GCConfig{}.withDefaults().thresholds()

// gcWorld builds a state store through the state API, one Raft index per
// write, with the times each test chooses.
type gcWorld struct {
	t   *testing.T
	s   *state.StateStore
	idx uint64
}

func newGCWorld(t *testing.T) *gcWorld {
	t.Helper()
	s, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	return &gcWorld{t: t, s: s}
}

func (w *gcWorld) next() uint64 { w.idx++; return w.idx }

func (w *gcWorld) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// node registers a node with status, changed at statusAt (Unix ns).
func (w *gcWorld) node(status string, statusAt int64) *structs.Node {
	w.t.Helper()
	n := statetest.Node(0)
	w.must(w.s.UpsertNode(w.next(), n))
	w.must(w.s.UpdateNodeStatus(w.next(), n.ID, status, statusAt/int64(time.Second)))
	return n
}

// job registers job, submitted at submit (Unix ns).
func (w *gcWorld) job(job *structs.Job, submit int64) *structs.Job {
	w.t.Helper()
	job.SubmitTime = submit
	w.must(w.s.UpsertJob(w.next(), job))
	return job
}

// eval stores an evaluation of job with status, last changed at mod.
func (w *gcWorld) eval(job *structs.Job, status string, mod int64) *structs.Evaluation {
	w.t.Helper()
	e := statetest.Eval(job)
	e.Status, e.CreateTime, e.ModifyTime = status, mod, mod
	w.must(w.s.UpsertEvals(w.next(), []*structs.Evaluation{e}))
	return e
}

// alloc places an allocation of job on node for eval, then records the
// client status (when not pending) and desired status, all at mod. edit,
// when set, changes the allocation before it is placed.
func (w *gcWorld) alloc(job *structs.Job, node *structs.Node, eval *structs.Evaluation, desired, client string, mod int64, edit func(a *structs.Allocation)) *structs.Allocation {
	w.t.Helper()
	a := statetest.Alloc(job, node)
	a.EvalID = eval.ID
	stored, err := w.s.JobByID(nil, job.ID)
	w.must(err)
	if stored != nil {
		a.Job = stored
	}
	if edit != nil {
		edit(a)
	}
	w.must(w.s.UpsertPlanResults(w.next(), &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a}, UpdatedAt: mod}))
	if desired != structs.AllocDesiredStatusRun {
		w.must(w.s.UpsertPlanResults(w.next(), &structs.ApplyPlanResultsRequest{AllocsStopped: []*structs.Allocation{{ID: a.ID, DesiredStatus: desired}}, UpdatedAt: mod}))
	}
	if client != structs.AllocClientStatusPending {
		w.must(w.s.UpdateAllocsFromClient(w.next(), []*structs.Allocation{{ID: a.ID, ClientStatus: client}}, mod))
	}
	return a
}

// stop marks the job stopped.
func (w *gcWorld) stop(job *structs.Job) {
	w.t.Helper()
	j, err := w.s.JobByID(nil, job.ID)
	w.must(err)
	c := j.Copy()
	c.Stop = true
	w.must(w.s.UpsertJob(w.next(), c))
}

// purge deletes the job.
func (w *gcWorld) purge(job *structs.Job) {
	w.t.Helper()
	w.must(w.s.DeleteJob(w.next(), job.ID))
}

// chosen returns every ID the work removes: evaluations, allocations, jobs
// (with the evaluations and allocations of their purge) and nodes.
func chosen(work *gcWork) map[string]bool {
	out := map[string]bool{}
	for _, id := range append(append([]string(nil), work.evals...), work.allocs...) {
		out[id] = true
	}
	for _, j := range work.jobs {
		out[j.JobID] = true
		for _, id := range append(append([]string(nil), j.Evals...), j.Allocs...) {
			out[id] = true
		}
	}
	for _, n := range work.nodes {
		out[n.NodeID] = true
	}
	return out
}

// TestSelectGC checks each garbage-collection rule on a hand-built state:
// setup returns the IDs the collection must remove and those it must keep.
func TestSelectGC(t *testing.T) {
	const (
		run      = structs.AllocDesiredStatusRun
		stop     = structs.AllocDesiredStatusStop
		pending  = structs.AllocClientStatusPending
		running  = structs.AllocClientStatusRunning
		complete = structs.AllocClientStatusComplete
		failed   = structs.AllocClientStatusFailed
		lost     = structs.AllocClientStatusLost
		done     = structs.EvalStatusComplete
		blocked  = structs.EvalStatusBlocked
		down     = structs.NodeStatusDown
		ready    = structs.NodeStatusReady
	)
	cases := []struct {
		name  string
		th    gcThresholds
		setup func(w *gcWorld) (gone, kept []string)
	}{
		{
			name: "old terminal eval of a service job goes with its finished allocations",
			th:   defaultTh,
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := w.job(statetest.Job(), ago(3*time.Hour))
				e := w.eval(j, done, ago(2*time.Hour))
				a1 := w.alloc(j, n, e, stop, complete, ago(2*time.Hour), nil)
				a2 := w.alloc(j, n, e, stop, failed, ago(2*time.Hour), nil)
				return []string{e.ID, a1.ID, a2.ID}, []string{j.ID, n.ID}
			},
		},
		{
			// The default service policy (30 s doubling to 1 h) reaches
			// its cap at the 8th failure: the 8 newest failures of an
			// index set the next delay and stay; older ones go.
			name: "unlimited policy with a delay keeps the failures that set the backoff",
			th:   gcThresholds{},
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := w.job(statetest.Job(), ago(30*time.Hour))
				e := w.eval(j, done, ago(20*time.Hour))
				var gone, kept []string
				for i := 0; i < 10; i++ {
					a := w.alloc(j, n, e, run, failed, ago(time.Duration(20-i)*time.Hour), nil)
					if i < 2 {
						gone = append(gone, a.ID)
					} else {
						kept = append(kept, a.ID)
					}
				}
				return gone, append(kept, e.ID, j.ID)
			},
		},
		{
			name: "eval with a running allocation stays, and so does the allocation",
			th:   gcThresholds{},
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := w.job(statetest.Job(), ago(3*time.Hour))
				e := w.eval(j, done, ago(2*time.Hour))
				a := w.alloc(j, n, e, run, running, ago(2*time.Hour), nil)
				b := w.alloc(j, n, e, stop, running, ago(2*time.Hour), nil) // told to stop, not yet stopped
				c := w.alloc(j, n, e, stop, complete, ago(2*time.Hour), nil)
				return []string{c.ID}, []string{e.ID, a.ID, b.ID, j.ID}
			},
		},
		{
			name: "young terminal eval and allocation stay",
			th:   defaultTh,
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := w.job(statetest.Job(), ago(3*time.Hour))
				e := w.eval(j, done, ago(30*time.Minute))
				a := w.alloc(j, n, e, stop, complete, ago(30*time.Minute), nil)
				return nil, []string{e.ID, a.ID}
			},
		},
		{
			name: "pending and blocked evals of a live job stay",
			th:   gcThresholds{},
			setup: func(w *gcWorld) ([]string, []string) {
				j := w.job(statetest.Job(), ago(3*time.Hour))
				e1 := w.eval(j, structs.EvalStatusPending, ago(2*time.Hour))
				e2 := w.eval(j, blocked, ago(2*time.Hour))
				return nil, []string{e1.ID, e2.ID, j.ID}
			},
		},
		{
			name: "live batch job keeps its finished allocations, even forced",
			th:   gcThresholds{},
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := statetest.BatchJob(0)
				j.TaskGroups[0].Count = 3
				w.job(j, ago(48*time.Hour))
				e := w.eval(j, done, ago(40*time.Hour))
				idx := 0
				at := func(a *structs.Allocation) { a.Name = structs.AllocName(j.ID, "web", idx); idx++ }
				a0 := w.alloc(j, n, e, run, complete, ago(40*time.Hour), at)
				a1 := w.alloc(j, n, e, run, failed, ago(40*time.Hour), at)
				a2 := w.alloc(j, n, e, run, running, ago(40*time.Hour), at)
				return nil, []string{e.ID, a0.ID, a1.ID, a2.ID, j.ID}
			},
		},
		{
			name: "live batch job lets go of finished allocations of an older version and lost ones",
			th:   gcThresholds{},
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := statetest.BatchJob(0)
				j.TaskGroups[0].Count = 2
				w.job(j, ago(48*time.Hour))
				e := w.eval(j, done, ago(40*time.Hour))
				old := w.alloc(j, n, e, run, complete, ago(40*time.Hour), func(a *structs.Allocation) {
					a.Job = a.Job.Copy()
					a.Job.JobModifyIndex--
				})
				gone := w.alloc(j, n, e, run, lost, ago(40*time.Hour), nil)
				cur := w.alloc(j, n, e, run, running, ago(40*time.Hour), func(a *structs.Allocation) { a.Name = structs.AllocName(j.ID, "web", 1) })
				return []string{old.ID, gone.ID}, []string{e.ID, cur.ID, j.ID}
			},
		},
		{
			name: "batch evals of a live job wait for the batch threshold",
			th:   defaultTh,
			setup: func(w *gcWorld) ([]string, []string) {
				j := w.job(statetest.BatchJob(0), ago(48*time.Hour))
				young := w.eval(j, done, ago(2*time.Hour))
				old := w.eval(j, done, ago(25*time.Hour))
				w.eval(j, structs.EvalStatusPending, ago(time.Minute)) // keeps the job pending, not dead
				return []string{old.ID}, []string{young.ID, j.ID}
			},
		},
		{
			name: "purged job's finished allocations go after the small threshold",
			th:   defaultTh,
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := w.job(statetest.Job(), ago(3*time.Hour))
				e := w.eval(j, done, ago(2*time.Minute))
				a := w.alloc(j, n, e, stop, complete, ago(2*time.Minute), nil)
				young := w.alloc(j, n, e, stop, complete, ago(10*time.Second), nil)
				r := w.alloc(j, n, e, stop, running, ago(2*time.Minute), nil)
				w.purge(j)
				return []string{a.ID}, []string{e.ID, young.ID, r.ID}
			},
		},
		{
			name: "allocation told to stop on a node that no longer exists is finished",
			th:   gcThresholds{},
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := w.job(statetest.Job(), ago(3*time.Hour))
				e := w.eval(j, done, ago(2*time.Hour))
				a := w.alloc(j, n, e, stop, pending, ago(2*time.Hour), nil)
				w.must(w.s.DeleteNode(w.next(), n.ID))
				w.purge(j)
				return []string{e.ID, a.ID}, nil
			},
		},
		{
			name: "old stopped job is purged with its evals and allocations",
			th:   defaultTh,
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := w.job(statetest.Job(), ago(10*time.Hour))
				e1 := w.eval(j, done, ago(9*time.Hour))
				a := w.alloc(j, n, e1, stop, complete, ago(5*time.Hour), nil)
				w.stop(j)
				e2 := w.eval(j, done, ago(5*time.Hour))
				e3 := w.eval(j, blocked, ago(6*time.Hour)) // left over from before the stop
				return []string{j.ID, e1.ID, e2.ID, e3.ID, a.ID}, []string{n.ID}
			},
		},
		{
			name: "recently stopped job stays, and its evals wait for it",
			th:   defaultTh,
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := w.job(statetest.Job(), ago(10*time.Hour))
				e1 := w.eval(j, done, ago(9*time.Hour))
				a := w.alloc(j, n, e1, stop, complete, ago(2*time.Hour), nil)
				w.stop(j)
				e2 := w.eval(j, done, ago(2*time.Hour))
				return nil, []string{j.ID, e1.ID, e2.ID, a.ID}
			},
		},
		{
			name: "stopped job whose allocation still runs stays",
			th:   gcThresholds{},
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := w.job(statetest.Job(), ago(10*time.Hour))
				e := w.eval(j, done, ago(9*time.Hour))
				a := w.alloc(j, n, e, stop, running, ago(9*time.Hour), nil)
				w.stop(j)
				return nil, []string{j.ID, e.ID, a.ID}
			},
		},
		{
			name: "old dead batch job is purged, a young one stays",
			th:   defaultTh,
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				oldJob := w.job(statetest.BatchJob(0), ago(10*time.Hour))
				oe := w.eval(oldJob, done, ago(9*time.Hour))
				oa := w.alloc(oldJob, n, oe, run, complete, ago(5*time.Hour), nil)
				newJob := w.job(statetest.BatchJob(0), ago(10*time.Hour))
				ne := w.eval(newJob, done, ago(9*time.Hour))
				na := w.alloc(newJob, n, ne, run, complete, ago(time.Hour), nil)
				return []string{oldJob.ID, oe.ID, oa.ID}, []string{newJob.ID, ne.ID, na.ID}
			},
		},
		{
			name: "down node goes only when old and empty",
			th:   defaultTh,
			setup: func(w *gcWorld) ([]string, []string) {
				old := w.node(down, ago(25*time.Hour))
				young := w.node(down, ago(23*time.Hour))
				busy := w.node(down, ago(25*time.Hour))
				up := w.node(ready, ago(25*time.Hour))
				withLost := w.node(down, ago(25*time.Hour))
				j := w.job(statetest.Job(), ago(30*time.Hour))
				e := w.eval(j, structs.EvalStatusPending, ago(time.Minute))
				w.alloc(j, busy, e, stop, running, ago(25*time.Hour), nil)
				// The lost allocation is finished and old: it goes too.
				la := w.alloc(j, withLost, e, stop, lost, ago(25*time.Hour), nil)
				return []string{old.ID, withLost.ID, la.ID}, []string{young.ID, busy.ID, up.ID}
			},
		},
		{
			name: "failed allocations a limited reschedule policy still counts stay",
			th:   gcThresholds{},
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := statetest.Job()
				j.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Attempts: 2, Interval: time.Hour}
				w.job(j, ago(10*time.Hour))
				e := w.eval(j, done, ago(6*time.Hour))
				stale := w.alloc(j, n, e, run, failed, ago(5*time.Hour+time.Minute), nil)
				recent := w.alloc(j, n, e, run, failed, ago(4*time.Hour+30*time.Minute), nil)
				newest := w.alloc(j, n, e, run, failed, ago(4*time.Hour), nil)
				return []string{stale.ID}, []string{recent.ID, newest.ID, e.ID, j.ID}
			},
		},
		{
			name: "failed allocations of an unlimited reschedule policy go",
			th:   gcThresholds{},
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := statetest.Job()
				j.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Unlimited: true}
				w.job(j, ago(10*time.Hour))
				e := w.eval(j, done, ago(5*time.Hour))
				a := w.alloc(j, n, e, run, failed, ago(5*time.Hour), nil)
				return []string{a.ID, e.ID}, []string{j.ID}
			},
		},
		{
			name: "gang group keeps its latest attempt",
			th:   gcThresholds{},
			setup: func(w *gcWorld) ([]string, []string) {
				n := w.node(ready, ago(48*time.Hour))
				j := statetest.Job()
				j.TaskGroups[0].Gang = true
				w.job(j, ago(10*time.Hour))
				e := w.eval(j, done, ago(5*time.Hour))
				first := w.alloc(j, n, e, stop, failed, ago(5*time.Hour), func(a *structs.Allocation) { a.Gang = &structs.GangInfo{WorldSize: 1, Attempt: 0} })
				last := w.alloc(j, n, e, stop, failed, ago(5*time.Hour), func(a *structs.Allocation) { a.Gang = &structs.GangInfo{WorldSize: 1, Attempt: 1, Restarts: 1} })
				return []string{first.ID}, []string{last.ID, e.ID, j.ID}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newGCWorld(t)
			wantGone, wantKept := c.setup(w)
			snap, err := w.s.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			work, err := selectGC(snap, gcNow, c.th)
			if err != nil {
				t.Fatal(err)
			}
			got := chosen(work)
			for _, id := range wantGone {
				if !got[id] {
					t.Errorf("%s was kept, want it collected", id)
				}
			}
			for _, id := range wantKept {
				if got[id] {
					t.Errorf("%s was collected, want it kept", id)
				}
			}
			if len(got) != len(wantGone) {
				t.Errorf("collected %d objects, want %d: %v", len(got), len(wantGone), got)
			}
		})
	}
}

func TestGCBatches(t *testing.T) {
	ids := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = prefix + string(rune('a'+i%26))
		}
		return out
	}
	t.Run("eval delete", func(t *testing.T) {
		cases := []struct {
			name          string
			evals, allocs int
			maxIDs        int
			want          []int // IDs per request
		}{
			{"nothing", 0, 0, 3, nil},
			{"fits one", 1, 2, 3, []int{3}},
			{"splits allocations first", 2, 5, 3, []int{3, 3, 1}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				reqs := evalDeleteBatches(ids("e", c.evals), ids("a", c.allocs), c.maxIDs)
				if len(reqs) != len(c.want) {
					t.Fatalf("%d requests, want %d", len(reqs), len(c.want))
				}
				seenEval := false
				for i, r := range reqs {
					if n := len(r.Evals) + len(r.Allocs); n != c.want[i] {
						t.Errorf("request %d holds %d IDs, want %d", i, n, c.want[i])
					}
					if seenEval && len(r.Allocs) > 0 {
						t.Errorf("request %d removes allocations after an earlier one removed evaluations", i)
					}
					seenEval = seenEval || len(r.Evals) > 0
				}
			})
		}
	})
	t.Run("purge", func(t *testing.T) {
		job := func(n int) *structs.GCJobPurge { return &structs.GCJobPurge{JobID: "j", Allocs: ids("a", n-1)} }
		node := &structs.GCNodePurge{NodeID: "n"}
		cases := []struct {
			name   string
			jobs   []*structs.GCJobPurge
			nodes  int
			maxIDs int
			want   []int // jobs+nodes per request
		}{
			{"nothing", nil, 0, 4, nil},
			{"jobs and nodes share", []*structs.GCJobPurge{job(2)}, 2, 4, []int{3}},
			{"big job alone", []*structs.GCJobPurge{job(2), job(9), job(1)}, 1, 4, []int{1, 1, 2}},
			{"nodes split", nil, 5, 2, []int{2, 2, 1}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var nodes []*structs.GCNodePurge
				for range c.nodes {
					nodes = append(nodes, node)
				}
				reqs := purgeBatches(c.jobs, nodes, c.maxIDs)
				if len(reqs) != len(c.want) {
					t.Fatalf("%d requests, want %d", len(reqs), len(c.want))
				}
				for i, r := range reqs {
					if n := len(r.Jobs) + len(r.Nodes); n != c.want[i] {
						t.Errorf("request %d holds %d jobs and nodes, want %d", i, n, c.want[i])
					}
				}
			})
		}
	})
}

// TestNodeAllocsWatchIndex checks the index of NodeAllocations' reads: a
// removal seen while waiting raises it to the allocs table's index, and it
// stays at MinQueryIndex on a timeout unless the state went back.
func TestNodeAllocsWatchIndex(t *testing.T) {
	a := &structs.Allocation{ID: "a", ModifyIndex: 10}
	b := &structs.Allocation{ID: "b", ModifyIndex: 12}
	c := &structs.Allocation{ID: "c", ModifyIndex: 30}
	type read struct {
		allocs []*structs.Allocation
		table  uint64
		want   uint64
	}
	cases := []struct {
		name     string
		minIndex uint64
		reads    []read
	}{
		{"first query answers the highest ModifyIndex", 0, []read{{[]*structs.Allocation{a, b}, 20, 12}}},
		{"empty node answers 1", 0, []read{{nil, 0, 1}}},
		{"waiting read holds at MinQueryIndex", 15, []read{{[]*structs.Allocation{a, b}, 20, 15}, {[]*structs.Allocation{a, b}, 25, 15}}},
		{"removal raises to the table index", 15, []read{{[]*structs.Allocation{a, b}, 20, 15}, {[]*structs.Allocation{a}, 26, 26}}},
		{"last allocation removed", 15, []read{{[]*structs.Allocation{a}, 20, 15}, {nil, 27, 27}}},
		{"new allocation is its own change", 15, []read{{[]*structs.Allocation{a, b}, 20, 15}, {[]*structs.Allocation{a, b, c}, 30, 30}}},
		{"replaced allocation counts as a removal", 15, []read{{[]*structs.Allocation{a, b}, 20, 15}, {[]*structs.Allocation{a, c}, 31, 31}}},
		{"older restored state goes back", 50, []read{{[]*structs.Allocation{a, b}, 20, 20}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &nodeAllocsWatch{minIndex: tc.minIndex}
			for i, r := range tc.reads {
				if got := w.index(r.allocs, r.table); got != r.want {
					t.Fatalf("read %d: index %d, want %d", i, got, r.want)
				}
			}
		})
	}
}

// TestGCConfigDefaults checks GCConfig.withDefaults: zero takes the
// defaults, a positive interval below MinGCInterval is raised to it, a
// negative one (periodic collection off) is kept.
func TestGCConfigDefaults(t *testing.T) {
	cases := []struct {
		name         string
		interval     time.Duration
		wantInterval time.Duration
	}{
		{"zero is the default", 0, DefaultGCInterval},
		{"1ns is raised to the minimum", time.Nanosecond, MinGCInterval},
		{"just below the minimum", MinGCInterval - 1, MinGCInterval},
		{"the minimum is kept", MinGCInterval, MinGCInterval},
		{"a minute is kept", time.Minute, time.Minute},
		{"negative turns it off and is kept", -time.Second, -time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := GCConfig{Interval: tc.interval}.withDefaults()
			if got.Interval != tc.wantInterval {
				t.Fatalf("Interval = %s, want %s", got.Interval, tc.wantInterval)
			}
			if got.EvalGCThreshold != DefaultEvalGCThreshold || got.MaxIDsPerEntry != DefaultGCMaxIDsPerEntry {
				t.Fatalf("defaults not filled: %+v", got)
			}
		})
	}
}
