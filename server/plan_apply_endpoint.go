package server

import (
	"github.com/gpulayer/gpulayer/structs"
)

// refuseEndpointMoves keeps an endpoint's members from being stopped while
// the members meant to replace them were refused: when a refused node held
// new members of an endpoint (Shared.Endpoint set, CreateIndex 0), the
// plan's stops of that endpoint's allocations (structs.EndpointOwner) on the
// nodes still accepted are held back too. The scheduler plans again from
// the refreshed state (RefreshIndex is set whenever a node is refused). It
// returns how many stops it held back.
func refuseEndpointMoves(plan *structs.Plan, result *structs.PlanResult) int {
	if len(result.RejectedNodes) == 0 {
		return 0
	}
	owners := map[string]bool{}
	for _, nodeID := range result.RejectedNodes {
		for _, a := range plan.NodeAllocation[nodeID] {
			if a.CreateIndex == 0 && a.AllocatedResources != nil && a.AllocatedResources.Shared != nil && a.AllocatedResources.Shared.Endpoint != nil {
				owners[structs.EndpointOwner(a)] = true
			}
		}
	}
	if len(owners) == 0 {
		return 0
	}
	held := 0
	for _, nodeID := range sortedKeys(result.NodeUpdate) {
		var keep []*structs.Allocation
		for _, a := range result.NodeUpdate[nodeID] {
			if owners[structs.EndpointOwner(a)] {
				held++
				continue
			}
			keep = append(keep, a)
		}
		if len(keep) == 0 {
			delete(result.NodeUpdate, nodeID)
		} else {
			result.NodeUpdate[nodeID] = keep
		}
	}
	return held
}
