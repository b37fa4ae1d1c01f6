package convert

import (
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// ClientEndpointsRead renders a client's endpoint routers
// (GET /v1/client/endpoints); never nil.
func ClientEndpointsRead(in []*structs.ClientEndpointStatus) []*api.ClientEndpoint {
	out := make([]*api.ClientEndpoint, 0, len(in))
	for _, e := range in {
		if e == nil {
			continue
		}
		ce := &api.ClientEndpoint{Namespace: e.Namespace, JobID: e.JobID, TaskGroup: e.TaskGroup, Endpoint: e.Endpoint, Model: e.Model,
			Policy: e.Policy, ListenAddr: e.ListenAddr, Admitted: e.Admitted, Requests: e.Requests, Failed: e.Failed,
			Rejected: e.Rejected, InFlight: e.InFlight, Error: e.Error, Members: []*api.ClientEndpointMember{}}
		for _, m := range e.Members {
			if m == nil {
				continue
			}
			cm := &api.ClientEndpointMember{AllocID: m.AllocID, Index: m.Index, Addr: m.Addr, Admitted: m.Admitted, Reason: m.Reason,
				JobVersion: m.Identity.JobVersion, ArtifactDigest: m.Identity.ArtifactDigest, ConfigDigest: m.Identity.ConfigDigest,
				Outstanding: m.Outstanding, Served: m.Served, Failed: m.Failed, Processes: []*api.EndpointMemberProcess{}}
			if m.LastVerified > 0 {
				cm.LastVerified = time.Unix(0, m.LastVerified).UTC()
			}
			if m.UpdatedAt > 0 {
				cm.UpdatedAt = time.Unix(0, m.UpdatedAt).UTC()
			}
			for _, p := range m.Processes {
				if p != nil {
					cm.Processes = append(cm.Processes, &api.EndpointMemberProcess{Task: p.Task, Driver: p.Driver, PID: p.PID,
						Alive: p.Alive, RSSMiB: p.RSSMiB, Error: p.Error})
				}
			}
			ce.Members = append(ce.Members, cm)
		}
		out = append(out, ce)
	}
	return out
}
