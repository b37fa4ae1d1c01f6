package state

import (
	"fmt"
	"slices"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// UpsertArtifacts stores artifact metadata at Raft index index. A new
// digest is stored as given (a copy; ModifyTime defaults to CreateTime);
// for a stored digest the stored references whose job or allocation no
// longer exists are dropped, the rest merged with the new ones (union,
// sorted), and
// ModifyTime and ModifyIndex move on, while CreateIndex, CreateTime, Size,
// MediaType and UploadedBy stay the first upload's. Errors wrap
// structs.ErrInvalid for a nil artifact or one that fails Validate, or a
// Size that differs from the stored one (the same digest cannot have two
// sizes).
func (s *StateStore) UpsertArtifacts(index uint64, arts []*structs.Artifact) error {
	txn := s.writeTxn()
	defer txn.Abort()
	for _, a := range arts {
		if a == nil {
			return invalid("artifact: nil")
		}
		if err := a.Validate(); err != nil {
			return err
		}
		existing, err := firstByID[structs.Artifact](txn, nil, TableArtifacts, "artifact", a.Digest)
		if err != nil {
			return err
		}
		c := a.Copy()
		c.CreateIndex, c.ModifyIndex = index, index
		if c.ModifyTime == 0 {
			c.ModifyTime = c.CreateTime
		}
		if existing != nil {
			if existing.Size != a.Size {
				return invalid("artifact %s: Size %d differs from the stored %d", a.Digest, a.Size, existing.Size)
			}
			c.CreateIndex, c.CreateTime = existing.CreateIndex, existing.CreateTime
			c.MediaType, c.UploadedBy = existing.MediaType, existing.UploadedBy
			oldJobs, oldAllocs, err := liveArtifactRefs(txn, existing)
			if err != nil {
				return err
			}
			c.JobRefs = mergeRefs(oldJobs, a.JobRefs)
			c.AllocRefs = mergeRefs(oldAllocs, a.AllocRefs)
			if len(c.JobRefs) > structs.MaxArtifactRefs || len(c.AllocRefs) > structs.MaxArtifactRefs {
				return invalid("artifact %s: more than %d job or allocation references", a.Digest, structs.MaxArtifactRefs)
			}
		} else {
			c.JobRefs, c.AllocRefs = mergeRefs(nil, c.JobRefs), mergeRefs(nil, c.AllocRefs)
		}
		if err := txn.Insert(TableArtifacts, c); err != nil {
			return fmt.Errorf("state: insert artifact %s: %w", c.Digest, err)
		}
	}
	if err := setIndex(txn, TableArtifacts, index); err != nil {
		return err
	}
	s.commitTxn(txn, index)
	return nil
}

// liveArtifactRefs returns the references of a whose job (same namespace
// and ID) or allocation still exists in txn: a merge drops the dead ones,
// so references to purged jobs and collected allocations cannot fill the
// MaxArtifactRefs cap. The new references of an upsert are kept as given
// (a job's inputs are referenced just before the job registers).
func liveArtifactRefs(txn *memdb.Txn, a *structs.Artifact) (jobs, allocs []string, err error) {
	for _, ref := range a.JobRefs {
		_, id, ok := structs.SplitArtifactJobRef(ref)
		if !ok {
			continue
		}
		j, err := jobByIDTxn(txn, nil, id)
		if err != nil {
			return nil, nil, err
		}
		if structs.ArtifactJobRefMatches(ref, j) {
			jobs = append(jobs, ref)
		}
	}
	for _, id := range a.AllocRefs {
		al, err := allocByIDTxn(txn, nil, id)
		if err != nil {
			return nil, nil, err
		}
		if al != nil {
			allocs = append(allocs, id)
		}
	}
	return jobs, allocs, nil
}

// mergeRefs returns the sorted union of a and b without duplicates (nil
// when both are empty).
func mergeRefs(a, b []string) []string {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// DeleteArtifacts removes each artifact named whose stored ModifyIndex
// still equals the one given; an artifact missing or changed since is
// skipped (it was referenced again or already removed). It returns the
// digests removed. It never fails on a skipped one.
func (s *StateStore) DeleteArtifacts(index uint64, dels []*structs.ArtifactDelete) ([]string, error) {
	txn := s.writeTxn()
	defer txn.Abort()
	var removed []string
	for _, d := range dels {
		if d == nil {
			return nil, invalid("artifact delete: nil")
		}
		existing, err := firstByID[structs.Artifact](txn, nil, TableArtifacts, "artifact", d.Digest)
		if err != nil {
			return nil, err
		}
		if existing == nil || existing.ModifyIndex != d.ModifyIndex {
			continue
		}
		if err := txn.Delete(TableArtifacts, existing); err != nil {
			return nil, fmt.Errorf("state: delete artifact %s: %w", d.Digest, err)
		}
		removed = append(removed, d.Digest)
	}
	if err := setIndex(txn, TableArtifacts, index); err != nil {
		return nil, err
	}
	s.commitTxn(txn, index)
	return removed, nil
}

// ArtifactByDigest returns the artifact's metadata, or nil and no error
// when the digest is unknown.
func (s *StateStore) ArtifactByDigest(ws memdb.WatchSet, digest string) (*structs.Artifact, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return firstByID[structs.Artifact](txn, ws, TableArtifacts, "artifact", digest)
}

// Artifacts returns every artifact's metadata, sorted by digest.
func (s *StateStore) Artifacts(ws memdb.WatchSet) ([]*structs.Artifact, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.Artifact](txn, ws, TableArtifacts, "id")
}

// ArtifactRestore inserts an artifact from a snapshot. Errors wrap
// structs.ErrInvalid for a nil artifact or one without a valid digest.
func (r *StateRestore) ArtifactRestore(a *structs.Artifact) error {
	if a == nil {
		return invalid("restore artifact: nil")
	}
	if err := structs.ValidArtifactDigest("Digest", a.Digest); err != nil {
		return err
	}
	return r.insert(TableArtifacts, a.Digest, a)
}
