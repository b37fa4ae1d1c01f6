package state

import (
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

func TestJobVersionsKeptAndPruned(t *testing.T) {
	s := testStore(t)
	job := statetest.Job()
	idx := uint64(10)
	register := func(count int) {
		t.Helper()
		j := job.Copy()
		j.TaskGroups[0].Count = count
		idx++
		must(t, s.UpsertJob(idx, j))
	}
	register(1)
	register(1) // the same spec: no new version
	vs, err := s.JobVersionsByID(nil, job.ID)
	must(t, err)
	if len(vs) != 1 || vs[0].Version != 0 {
		t.Fatalf("versions after an unchanged register = %d", len(vs))
	}
	register(2) // v1
	must(t, s.UpdateJobStability(100, job.ID, 1, true))
	if cur := mustJob(t, s, job.ID); !cur.Stable {
		t.Fatalf("current version not marked stable")
	}
	for c := 3; c <= 10; c++ { // v2..v9
		register(c)
	}
	vs, err = s.JobVersionsByID(nil, job.ID)
	must(t, err)
	if len(vs) != structs.JobTrackedVersions {
		t.Fatalf("kept %d versions, want %d", len(vs), structs.JobTrackedVersions)
	}
	if vs[0].Version != 9 || vs[0].Stable {
		t.Fatalf("newest kept = v%d stable %v, want v9 unstable", vs[0].Version, vs[0].Stable)
	}
	var stable *structs.Job
	for _, v := range vs {
		if v.Stable {
			stable = v
		}
	}
	if stable == nil || stable.Version != 1 || stable.TaskGroups[0].Count != 2 {
		t.Fatalf("the stable version 1 was pruned: %+v", vs)
	}
	old, err := s.JobByIDAndVersion(nil, job.ID, 5)
	must(t, err)
	if old == nil || old.TaskGroups[0].Count != 6 {
		t.Fatalf("version 5 = %+v", old)
	}
	if gone, _ := s.JobByIDAndVersion(nil, job.ID, 2); gone != nil {
		t.Fatalf("version 2 should have been pruned")
	}
	// A job whose ID has this one as a prefix is not listed with it.
	other := job.Copy()
	other.ID = job.ID + "2"
	must(t, s.UpsertJob(200, other))
	vs, _ = s.JobVersionsByID(nil, job.ID)
	for _, v := range vs {
		if v.ID != job.ID {
			t.Fatalf("versions of %q list %q", job.ID, v.ID)
		}
	}
	if err := s.UpdateJobStability(201, job.ID, 2, true); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("stability of a pruned version: %v, want ErrNotFound", err)
	}
	must(t, s.DeleteJob(300, job.ID))
	vs, _ = s.JobVersionsByID(nil, job.ID)
	if len(vs) != 0 {
		t.Fatalf("a deleted job keeps %d versions", len(vs))
	}
}
