package server_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestUpdateAllocsKeepsEndpointMember: a client update's EndpointMember
// travels through the endpoint and Raft into the state; a later update
// without one keeps it; a malformed one (oversized reason, a digest with
// a control byte) is refused to that caller before Raft.
func TestUpdateAllocsKeepsEndpointMember(t *testing.T) {
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
	em := &structs.EndpointMemberStatus{Reason: "binary digest differs from the admitted members",
		Identity: structs.EndpointIdentity{JobVersion: 1, ArtifactDigest: strings.Repeat("ab", 32), ConfigDigest: strings.Repeat("cd", 32)}, UpdatedAt: 42}
	if err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: alloc.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusRunning, EndpointMember: em}}); err != nil {
		t.Fatal(err)
	}
	em.Reason = "changed after send"
	got, _, err := s.AllocGet(ctxT(t), alloc.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.EndpointMember == nil || got.EndpointMember.Reason != "binary digest differs from the admitted members" ||
		got.EndpointMember.Identity.JobVersion != 1 || got.EndpointMember.UpdatedAt != 42 {
		t.Fatalf("endpoint member = %+v", got.EndpointMember)
	}
	if err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: alloc.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusRunning,
		TaskStates: got.TaskStates}}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ = s.AllocGet(ctxT(t), alloc.ID, nil); got.EndpointMember == nil || got.EndpointMember.UpdatedAt != 42 {
		t.Fatalf("an update without a member status dropped it: %+v", got.EndpointMember)
	}
	bad := []*structs.EndpointMemberStatus{
		{Reason: strings.Repeat("x", structs.MaxEndpointReasonBytes+1)},
		{Reason: "\xff\xfe"},
		{Identity: structs.EndpointIdentity{ArtifactDigest: "sha256:\n"}},
		{Identity: structs.EndpointIdentity{ConfigDigest: strings.Repeat("a", structs.MaxEndpointDigestBytes+1)}},
		{UpdatedAt: -1},
	}
	for i, b := range bad {
		err := s.UpdateAllocs(ctxT(t), []*structs.Allocation{{ID: alloc.ID, NodeID: node.ID, ClientStatus: structs.AllocClientStatusRunning, EndpointMember: b}})
		if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "EndpointMember") {
			t.Errorf("bad[%d]: %v", i, err)
		}
	}
}
