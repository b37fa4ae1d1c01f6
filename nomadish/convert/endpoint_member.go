package convert

import (
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// endpointMemberRead renders an allocation's endpoint member status, or
// nil when it has none.
func endpointMemberRead(s *structs.EndpointMemberStatus) *api.AllocEndpointMember {
	if s == nil {
		return nil
	}
	out := &api.AllocEndpointMember{Admitted: s.Admitted, Reason: s.Reason, JobVersion: s.Identity.JobVersion,
		ArtifactDigest: s.Identity.ArtifactDigest, ConfigDigest: s.Identity.ConfigDigest}
	if s.UpdatedAt > 0 {
		out.UpdatedAt = time.Unix(0, s.UpdatedAt).UTC()
	}
	return out
}
