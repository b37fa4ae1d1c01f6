package server_test

import (
	"github.com/gpulayer/gpulayer/internal/waittest"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestServer_RescheduleDelay runs a reschedule delay through the real
// server: a failed service (or batch) allocation with delay = 1s is not
// replaced at once; a "reschedule-later" evaluation waits until the failure
// time plus 1s, and the replacement, naming the failed allocation, is
// created no earlier than that.
func TestServer_RescheduleDelay(t *testing.T) {
	for _, typ := range []string{structs.JobTypeService, structs.JobTypeBatch} {
		t.Run(typ, func(t *testing.T) { testRescheduleDelay(t, typ) })
	}
}

func testRescheduleDelay(t *testing.T, typ string) {
	const delay = time.Second
	s := servertest.NewServer(t)
	registerNode(t, s, 0)
	job := statetest.Job()
	if typ == structs.JobTypeBatch {
		job = statetest.BatchJob(0)
	}
	job.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Unlimited: true, Delay: delay}
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	first := runningAllocs(t, s, job.ID, 1)[0]
	failed := first.Copy()
	failed.ClientStatus = structs.AllocClientStatusFailed
	if err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{failed}); err != nil {
		t.Fatal(err)
	}
	stored, _, err := s.AllocGet(ctxT(t), first.ID, nil)
	if err != nil || stored.ClientStatus != structs.AllocClientStatusFailed {
		t.Fatalf("failed allocation %+v: %v", stored, err)
	}
	due := stored.ModifyTime + int64(delay)

	// The follow-up evaluation is created, waiting until the due time.
	waittest.NoErr(t, 10*time.Second, "the reschedule-later evaluation", func() (bool, error) {
		evals, _, err := s.JobEvaluations(ctxT(t), job.ID, nil)
		for _, e := range evals {
			if e.TriggeredBy == structs.EvalTriggerRescheduleLater {
				if e.WaitUntil != due {
					t.Fatalf("reschedule-later WaitUntil %d, want failure time + delay %d", e.WaitUntil, due)
				}
				return true, nil
			}
		}
		return false, err
	})
	var repl *structs.Allocation
	waittest.NoErr(t, 10*time.Second, "the replacement allocation", func() (bool, error) {
		allocs, _, err := s.JobAllocations(ctxT(t), job.ID, nil)
		for _, a := range allocs {
			if a.PreviousAllocation == first.ID {
				repl = a
				if time.Now().UnixNano() < due {
					t.Fatalf("replacement seen %s before the delay ended", time.Duration(due-time.Now().UnixNano()))
				}
				return true, nil
			}
		}
		return false, err
	})
	if repl.CreateTime < due {
		t.Fatalf("replacement created %s after the failure, want at least %s", time.Duration(repl.CreateTime-stored.ModifyTime), delay)
	}
	t.Logf("replacement created %s after the failure (delay %s)", time.Duration(repl.CreateTime-stored.ModifyTime), delay)
}
