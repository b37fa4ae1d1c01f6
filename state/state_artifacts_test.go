package state

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestExploitArtifactRefCapFilledWithDeadRefs: references to jobs and
// allocations that no longer exist cannot fill the MaxArtifactRefs cap:
// a merge drops them (the FSM apply has the state), so a live job's new
// reference still fits; live references keep counting toward the cap.
func TestExploitArtifactRefCapFilledWithDeadRefs(t *testing.T) {
	s := testStore(t)
	job := statetest.Job()
	must(t, s.UpsertJob(5, job))
	d := "ab" + fmt.Sprintf("%062d", 0)
	dead := make([]string, structs.MaxArtifactRefs)
	deadAllocs := make([]string, structs.MaxArtifactRefs)
	for i := range dead {
		dead[i] = structs.ArtifactJobRef("default", fmt.Sprintf("bogus%d", i))
		deadAllocs[i] = structs.GenerateUUID()
	}
	// A job of the live job's ID but in another namespace is dead too.
	dead[0] = structs.ArtifactJobRef("other", job.ID)
	must(t, s.UpsertArtifacts(10, []*structs.Artifact{{Digest: d, Size: 3, JobRefs: dead, AllocRefs: deadAllocs}}))
	live := structs.ArtifactJobRef(job.Namespace, job.ID)
	if err := s.UpsertArtifacts(11, []*structs.Artifact{{Digest: d, Size: 3, JobRefs: []string{live}}}); err != nil {
		t.Fatalf("a live job's reference after %d dead ones: %v", len(dead), err)
	}
	a, err := s.ArtifactByDigest(nil, d)
	if err != nil || a == nil {
		t.Fatalf("artifact: %v %v", a, err)
	}
	if !slices.Equal(a.JobRefs, []string{live}) || len(a.AllocRefs) != 0 {
		t.Fatalf("references after the merge: jobs %d (%v...), allocs %d; want only %s", len(a.JobRefs), a.JobRefs[:min(3, len(a.JobRefs))], len(a.AllocRefs), live)
	}
	// The cap still holds for live references: the new ones of one upsert
	// are kept as given (a job's inputs are referenced before it registers).
	many := make([]string, structs.MaxArtifactRefs)
	for i := range many {
		many[i] = structs.ArtifactJobRef("default", fmt.Sprintf("new%d", i))
	}
	must(t, s.UpsertArtifacts(12, []*structs.Artifact{{Digest: d, Size: 3, JobRefs: many[:structs.MaxArtifactRefs-1]}}))
	if a, _ := s.ArtifactByDigest(nil, d); len(a.JobRefs) != structs.MaxArtifactRefs {
		t.Fatalf("live + new references: %d, want %d", len(a.JobRefs), structs.MaxArtifactRefs)
	}
	bad := &structs.Artifact{Digest: d, Size: 3, JobRefs: []string{"no-namespace"}}
	if err := s.UpsertArtifacts(13, []*structs.Artifact{bad}); err == nil {
		t.Fatal("a job reference without a namespace was stored")
	}
}
