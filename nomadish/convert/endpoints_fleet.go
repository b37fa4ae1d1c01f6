package convert

import (
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// EndpointViewFromStructs renders one endpoint's fleet view (nil: nil).
func EndpointViewFromStructs(v *structs.EndpointView) *api.EndpointView {
	if v == nil {
		return nil
	}
	out := &api.EndpointView{Namespace: v.Namespace, Name: v.Name, JobID: v.JobID, JobVersion: v.JobVersion, TaskGroup: v.Group,
		Model: v.Model, Revision: v.Revision, Port: v.Port, Count: v.Count, NodeID: v.NodeID, NodeName: v.NodeName,
		NodeAvailability: v.NodeAvailability, Address: v.Address, Members: v.Members, Admitted: v.Admitted, Status: v.Status,
		MemberList: make([]*api.EndpointMemberView, 0, len(v.MemberList)), Aliases: append([]string{}, v.Aliases...)}
	for _, m := range v.MemberList {
		if m == nil {
			continue
		}
		out.MemberList = append(out.MemberList, &api.EndpointMemberView{AllocID: m.AllocID, Index: m.Index, NodeID: m.NodeID,
			ClientStatus: m.ClientStatus, Admitted: m.Admitted, Reason: m.Reason,
			Identity: api.EndpointMemberIdentity{JobVersion: m.Identity.JobVersion, ArtifactDigest: m.Identity.ArtifactDigest, ConfigDigest: m.Identity.ConfigDigest}})
	}
	return out
}

// EndpointViewsFromStructs renders a list of views; never nil, so the
// JSON is [] for none.
func EndpointViewsFromStructs(vs []*structs.EndpointView) []*api.EndpointView {
	out := make([]*api.EndpointView, 0, len(vs))
	for _, v := range vs {
		if v != nil {
			out = append(out, EndpointViewFromStructs(v))
		}
	}
	return out
}

// EndpointAliasFromStructs renders an alias; PromotedAt as a UTC time.
func EndpointAliasFromStructs(a *structs.EndpointAlias) *api.EndpointAlias {
	if a == nil {
		return nil
	}
	return &api.EndpointAlias{Namespace: a.Namespace, Name: a.Name, Endpoint: a.Endpoint, JobID: a.JobID, PromotedBy: a.PromotedBy,
		PromotedAt: unixNano(a.PromotedAt), CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex}
}

// EndpointAliasesFromStructs renders a list of aliases; never nil.
func EndpointAliasesFromStructs(as []*structs.EndpointAlias) []*api.EndpointAlias {
	out := make([]*api.EndpointAlias, 0, len(as))
	for _, a := range as {
		if a != nil {
			out = append(out, EndpointAliasFromStructs(a))
		}
	}
	return out
}
