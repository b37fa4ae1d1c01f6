package server_test

import (
	"github.com/gpulayer/gpulayer/internal/waittest"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestServer_PreemptionRequeuesAndPlaces runs preemption through the real
// server: a priority-80 job that does not fit evicts a priority-20 batch
// job's allocation, is placed once the client reports it stopped, and the
// evicted job waits in the queue (a blocked evaluation), which JobQueue
// lists.
func TestServer_PreemptionRequeuesAndPlaces(t *testing.T) {
	s := servertest.NewServer(t)
	registerNode(t, s, 2)
	low := statetest.BatchJob(2)
	low.Priority = 20
	if _, err := s.JobRegister(ctxT(t), low); err != nil {
		t.Fatal(err)
	}
	lowAllocs := runningAllocs(t, s, low.ID, 1)

	high := statetest.BatchJob(2)
	high.Priority = 80
	if _, err := s.JobRegister(ctxT(t), high); err != nil {
		t.Fatal(err)
	}
	var evicted *structs.Allocation
	waittest.NoErr(t, 10*time.Second, "the low-priority allocation evicted", func() (bool, error) {
		a, _, err := s.AllocGet(ctxT(t), lowAllocs[0].ID, nil)
		evicted = a
		return err == nil && a.DesiredStatus == structs.AllocDesiredStatusEvict, err
	})
	// Until the client stops it, it holds its GPUs: the high job waits.
	if allocs, _, _ := s.JobAllocations(ctxT(t), high.ID, nil); len(allocs) != 0 {
		t.Fatalf("high job placed %d allocations while the evicted one still runs", len(allocs))
	}
	done := evicted.Copy()
	done.ClientStatus = structs.AllocClientStatusComplete
	if err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{done}); err != nil {
		t.Fatal(err)
	}
	highAllocs := runningAllocs(t, s, high.ID, 1)
	if len(highAllocs[0].DeviceIDs()) != 2 {
		t.Fatalf("high job holds %v", highAllocs[0].DeviceIDs())
	}
	// The evicted job is back in the queue, blocked on the GPUs the high job holds.
	waittest.NoErr(t, 10*time.Second, "the preempted job queued", func() (bool, error) {
		q, err := s.JobQueue(ctxT(t))
		if err != nil {
			return false, err
		}
		return len(q) == 1 && q[0].JobID == low.ID && q[0].Status == structs.EvalStatusBlocked && q[0].Queued["web"] == 1, nil
	})
	if allocs, _, _ := s.JobAllocations(ctxT(t), low.ID, nil); len(allocs) != 1 {
		t.Fatalf("low job has %d allocations, want only the evicted one", len(allocs))
	}
}
