package fsm

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/gpulayer/gpulayer/structs"
)

// TestFSMClientUpdateKeepsOutputs: a client update through the Raft log
// records the allocation's Outputs and LogArchive; a later update without
// them (a status resent by a restarted client) keeps them; the entry adds
// the allocation to its output's artifact references; a malformed output
// path is refused.
func TestFSMClientUpdateKeepsOutputs(t *testing.T) {
	entries, ids := contractLog(t)
	tf := newTestFSM(t)
	applyAll(t, tf, entries)
	dig := strings.Repeat("ab", 32)
	apply := func(idx uint64, a *structs.Allocation) interface{} {
		buf, err := structs.Encode(structs.AllocClientUpdateRequestType, &structs.AllocClientUpdateRequest{Allocs: []*structs.Allocation{a}, UpdatedAt: int64(idx)})
		if err != nil {
			t.Fatal(err)
		}
		return tf.RaftFSM().Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: buf})
	}
	buf, err := structs.Encode(structs.ArtifactUpsertRequestType, &structs.ArtifactUpsertRequest{Artifacts: []*structs.Artifact{{Digest: dig, Size: 12, CreateTime: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	base := uint64(len(entries)) + 1 // the artifact's entry
	if resp := tf.RaftFSM().Apply(&raft.Log{Index: base, Term: 1, Type: raft.LogCommand, Data: buf}); resp != nil {
		t.Fatal(resp)
	}
	if resp := apply(base+1, &structs.Allocation{ID: ids[0], ClientStatus: structs.AllocClientStatusFailed,
		Outputs: []*structs.ArtifactRef{{Path: "main/out.txt", Digest: dig, Size: 12}}, LogArchive: dig}); resp != nil {
		t.Fatal(resp)
	}
	if resp := apply(base+2, &structs.Allocation{ID: ids[0], ClientStatus: structs.AllocClientStatusFailed}); resp != nil {
		t.Fatal(resp)
	}
	a, err := tf.State().AllocByID(nil, ids[0])
	if err != nil || a == nil {
		t.Fatal(a, err)
	}
	if len(a.Outputs) != 1 || a.Outputs[0].Path != "main/out.txt" || a.Outputs[0].Digest != dig || a.Outputs[0].Size != 12 || a.LogArchive != dig {
		t.Fatalf("outputs not kept: %+v %q", a.Outputs, a.LogArchive)
	}
	art, err := tf.State().ArtifactByDigest(nil, dig)
	if err != nil || art == nil || len(art.AllocRefs) != 1 || art.AllocRefs[0] != ids[0] || art.ModifyIndex != base+1 {
		t.Fatalf("the allocation is not a reference of its output in the same entry: %+v %v", art, err)
	}
	if resp := apply(base+3, &structs.Allocation{ID: ids[1], ClientStatus: structs.AllocClientStatusComplete,
		Outputs: []*structs.ArtifactRef{{Path: "../../etc/passwd", Digest: dig}}}); resp == nil {
		t.Fatal("an output path with .. was recorded")
	}
}
