package server_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestUpdateAllocsRecordsOutputs: the endpoint passes a client update's
// Outputs and LogArchive into the Raft entry (it used to copy only the
// status fields), and refuses a malformed output path before Raft.
func TestUpdateAllocsRecordsOutputs(t *testing.T) {
	s := servertest.NewServer(t)
	node := statetest.Node(0)
	if _, err := s.NodeRegister(ctxT(t), node); err != nil {
		t.Fatal(err)
	}
	job := statetest.BatchJob(0)
	if _, err := s.JobRegister(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	alloc := runningAllocs(t, s, job.ID, 1)[0]
	dig := strings.Repeat("0f", 32)
	if _, err := s.ArtifactUpsert(ctxT(t), &structs.Artifact{Digest: dig, Size: 7}); err != nil {
		t.Fatal(err)
	}
	err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: alloc.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusComplete,
		Outputs: []*structs.ArtifactRef{{Path: "main/result.json", Digest: dig, Size: 7}}, LogArchive: dig}})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.AllocGet(ctxT(t), alloc.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Outputs) != 1 || got.Outputs[0].Path != "main/result.json" || got.Outputs[0].Digest != dig || got.LogArchive != dig {
		t.Fatalf("outputs not recorded: %+v %q", got.Outputs, got.LogArchive)
	}
	err = s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: alloc.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusComplete,
		Outputs: []*structs.ArtifactRef{{Path: "/etc/passwd", Digest: dig}}}})
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "outputs[0]: path") {
		t.Fatalf("absolute output path: %v", err)
	}
}
