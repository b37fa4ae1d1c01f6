package server

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
)

// NodeClientAllocs returns every allocation on the node, terminal or not,
// as a map from allocation ID to AllocModifyIndex, as a blocking query
// (Nomad's Node.GetClientAllocs). The query's index and the only channel
// it waits on are the node's row of server-side changes
// (state.NodeClientAllocsIndex): a placement, a stop or a removal of one
// of the node's allocations moves it; the client's own status reports and
// deployment health verdicts (which move only ModifyIndex) do not, so they
// neither wake the client nor re-run the query on the server. A client
// fetches the allocations whose index it has not seen with
// NodeFetchAllocs.
func (s *Server) NodeClientAllocs(ctx context.Context, nodeID string, q *structs.QueryOptions) (map[string]uint64, structs.QueryMeta, error) {
	var minIndex uint64
	if q != nil {
		minIndex = q.MinQueryIndex
	}
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		idx, err := st.NodeClientAllocsIndex(ws, nodeID, minIndex)
		// The allocations are read only for the answer (below), not at
		// each run that finds nothing new.
		return st, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	allocs, err := resp.(*state.StateStore).AllocsByNode(nil, nodeID)
	if err != nil {
		return nil, meta, err
	}
	out := make(map[string]uint64, len(allocs))
	for _, a := range allocs {
		out[a.ID] = a.AllocModifyIndex
	}
	return out, meta, nil
}

// NodeFetchAllocs returns the named allocations of the node, in the order
// asked, each without its Job and with each distinct job version once in
// the answer's Jobs (see structs.NodeFetchAllocsHTTPResponse). An ID that
// is not stored, or names an allocation of another node, is left out. It
// is a blocking query on the allocs table's index: with q.MinQueryIndex
// set it answers once the state is past that index (a stale read from a
// lagging server waits for it to catch up, up to q.MaxQueryTime), so a
// client fetching what a list at index I showed gets at least that. It
// reads from the leader unless q.AllowStale. Errors wrap
// structs.ErrInvalid for a request out of bounds
// (structs.NodeFetchAllocsHTTPRequest.Validate).
func (s *Server) NodeFetchAllocs(ctx context.Context, nodeID string, ids []string, q *structs.QueryOptions) (*structs.NodeFetchAllocsHTTPResponse, structs.QueryMeta, error) {
	req := structs.NodeFetchAllocsHTTPRequest{AllocIDs: ids}
	if err := req.Validate(); err != nil {
		return nil, structs.QueryMeta{}, fmt.Errorf("fetch allocations: %w", err)
	}
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		return fetchNodeAllocs(st, nodeID, ids)
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.(*structs.NodeFetchAllocsHTTPResponse), meta, nil
}

// fetchNodeAllocs builds NodeFetchAllocs' answer from st; its index is the
// allocs table's.
func fetchNodeAllocs(st *state.StateStore, nodeID string, ids []string) (*structs.NodeFetchAllocsHTTPResponse, uint64, error) {
	type key struct {
		id  string
		idx uint64
	}
	out := &structs.NodeFetchAllocsHTTPResponse{Allocs: make([]*structs.NodeFetchedAlloc, 0, len(ids))}
	seen := map[key]bool{}
	for _, id := range ids {
		a, err := st.AllocByID(nil, id)
		if err != nil {
			return nil, 0, err
		}
		if a == nil || a.NodeID != nodeID {
			continue
		}
		slim := *a
		slim.Job = nil
		fa := &structs.NodeFetchedAlloc{Alloc: &slim}
		if j := a.Job; j != nil {
			fa.JobIndex = j.ModifyIndex
			if k := (key{j.ID, j.ModifyIndex}); !seen[k] {
				seen[k] = true
				out.Jobs = append(out.Jobs, j)
			}
		}
		out.Allocs = append(out.Allocs, fa)
	}
	idx, err := st.Index(state.TableAllocs)
	return out, idx, err
}
