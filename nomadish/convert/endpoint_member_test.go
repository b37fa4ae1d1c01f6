package convert

import (
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestAllocReadEndpointMember: the allocation read carries the member's
// admission, reason and identity, its time in UTC; none without one.
func TestAllocReadEndpointMember(t *testing.T) {
	a := &structs.Allocation{ID: "a", EndpointMember: &structs.EndpointMemberStatus{Reason: "checks failing",
		Identity: structs.EndpointIdentity{JobVersion: 4, ArtifactDigest: "sha256:1", ConfigDigest: "2"}, UpdatedAt: 1_700_000_000_000_000_000}}
	out := AllocRead(a, "global", false).EndpointMember
	if out == nil || out.Admitted || out.Reason != "checks failing" || out.JobVersion != 4 || out.ArtifactDigest != "sha256:1" ||
		out.ConfigDigest != "2" || !out.UpdatedAt.Equal(time.Unix(0, 1_700_000_000_000_000_000)) || out.UpdatedAt.Location() != time.UTC {
		t.Fatalf("endpoint member = %+v", out)
	}
	if got := AllocRead(&structs.Allocation{ID: "b"}, "global", false).EndpointMember; got != nil {
		t.Fatalf("allocation without an endpoint: %+v", got)
	}
}
