package state

import (
	"fmt"
	"slices"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// keepStoredOutputsTxn returns the outputs and log archive of allocID's
// client update that the servers store, and adds allocID to the
// AllocRefs of each of those artifacts in txn (the same Raft entry that
// records them on the allocation), so an output is listed only while it
// is readable through its allocation and kept by retention. A digest
// with no artifact metadata (never uploaded, or already collected) or
// whose artifact already holds structs.MaxArtifactRefs allocation
// references is left out; a kept output's Size is the stored one. An
// artifact that newly gets the reference moves to ModifyIndex index and
// ModifyTime updatedAt (Unix ns), which also voids a retention delete
// chosen before. touched reports whether an artifact changed. The inputs
// are not modified.
func keepStoredOutputsTxn(txn *memdb.Txn, index uint64, updatedAt int64, allocID string, outputs []*structs.ArtifactRef, logArchive string) (kept []*structs.ArtifactRef, keptLog string, touched bool, err error) {
	ref := func(digest string) (int64, bool, error) {
		a, err := firstByID[structs.Artifact](txn, nil, TableArtifacts, "artifact", digest)
		if err != nil || a == nil {
			return 0, false, err
		}
		i, found := slices.BinarySearch(a.AllocRefs, allocID)
		if found {
			return a.Size, true, nil
		}
		if len(a.AllocRefs) >= structs.MaxArtifactRefs {
			return 0, false, nil
		}
		c := a.Copy()
		if !slices.IsSorted(c.AllocRefs) {
			slices.Sort(c.AllocRefs)
			i, _ = slices.BinarySearch(c.AllocRefs, allocID)
		}
		c.AllocRefs = slices.Insert(c.AllocRefs, i, allocID)
		c.ModifyIndex, c.ModifyTime = index, updatedAt
		if err := txn.Insert(TableArtifacts, c); err != nil {
			return 0, false, fmt.Errorf("state: reference artifact %s: %w", digest, err)
		}
		touched = true
		return c.Size, true, nil
	}
	for _, o := range outputs {
		size, ok, err := ref(o.Digest)
		if err != nil {
			return nil, "", false, err
		}
		if ok {
			c := o.Copy()
			c.Size = size
			kept = append(kept, c)
		}
	}
	if logArchive != "" {
		_, ok, err := ref(logArchive)
		if err != nil {
			return nil, "", false, err
		}
		if ok {
			keptLog = logArchive
		}
	}
	return kept, keptLog, touched, nil
}
