package client

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// AllocChangesConn is implemented by a ServerConn that serves the node
// allocation change routes (GET /v1/node/{id}/client-allocs and POST
// /v1/node/{id}/client-allocs/fetch; *server.Server in dev mode and
// HTTPServerConn). A client with one reads only what changed: the IDs and
// AllocModifyIndex of its node's allocations, then the allocations it has
// not seen at that index, each job version once, instead of every
// allocation with its job at each wake-up.
type AllocChangesConn interface {
	// NodeClientAllocs is the blocking query on the node's allocation IDs
	// and their AllocModifyIndex.
	NodeClientAllocs(ctx context.Context, nodeID string, q *structs.QueryOptions) (map[string]uint64, structs.QueryMeta, error)
	// NodeFetchAllocs returns the named allocations of the node (at most
	// structs.MaxFetchAllocs), without their jobs, each job version once.
	NodeFetchAllocs(ctx context.Context, nodeID string, ids []string, q *structs.QueryOptions) (*structs.NodeFetchAllocsHTTPResponse, structs.QueryMeta, error)
}

// fetchWait bounds how long a fetch waits for a lagging server to reach
// the index of the allocation list it follows.
const fetchWait = 10 * time.Second

// AllocTracker follows one node's allocations through an AllocChangesConn
// and keeps the newest copy of each. The client's alloc watch and the node
// simulator use it. It is not safe for concurrent use.
type AllocTracker struct {
	conn   AllocChangesConn
	nodeID string
	index  uint64
	known  map[string]*structs.Allocation
}

// NewAllocTracker returns a tracker of nodeID's allocations.
func NewAllocTracker(conn AllocChangesConn, nodeID string) *AllocTracker {
	return &AllocTracker{conn: conn, nodeID: nodeID, known: map[string]*structs.Allocation{}}
}

// Next waits (a blocking query of up to wait) until the node's allocations
// change on the servers, fetches the ones that changed and returns every
// allocation on the node (sorted by ID) and the changed ones. It returns
// when wait passes with nothing changed too, with changed empty. An
// allocation the fetch did not return (removed in between) is left out of
// both, and the next call asks again at once.
func (t *AllocTracker) Next(ctx context.Context, wait time.Duration) (all, changed []*structs.Allocation, err error) {
	// Stale reads, as Nomad's client makes them: any server answers from
	// its own state without a leadership check (a Raft round trip on the
	// leader per poll); the fetch below waits until the answering server
	// holds at least what the list showed.
	ids, meta, err := t.conn.NodeClientAllocs(ctx, t.nodeID, &structs.QueryOptions{MinQueryIndex: t.index, MaxQueryTime: wait, AllowStale: true})
	if err != nil {
		return nil, nil, err
	}
	var want []string
	for id, idx := range ids {
		if a := t.known[id]; a == nil || a.AllocModifyIndex != idx {
			want = append(want, id)
		}
	}
	for id := range t.known {
		if _, ok := ids[id]; !ok {
			delete(t.known, id)
		}
	}
	sort.Strings(want)
	complete := true
	for start := 0; start < len(want); start += structs.MaxFetchAllocs {
		chunk := want[start:min(start+structs.MaxFetchAllocs, len(want))]
		fq := &structs.QueryOptions{AllowStale: true, MaxQueryTime: fetchWait}
		if meta.Index > 1 {
			fq.MinQueryIndex = meta.Index - 1
		}
		resp, _, err := t.conn.NodeFetchAllocs(ctx, t.nodeID, chunk, fq)
		if err != nil {
			return nil, nil, err
		}
		got, err := resp.AttachJobs()
		if err != nil {
			return nil, nil, fmt.Errorf("fetch allocations: %w", err)
		}
		if len(got) != len(chunk) {
			complete = false
		}
		for _, a := range got {
			if _, listed := ids[a.ID]; !listed {
				continue
			}
			t.known[a.ID] = a
			changed = append(changed, a)
		}
	}
	if complete {
		if meta.Index < t.index {
			// The servers' index went back (a restored cluster): start
			// over from what they hold now.
			t.index = 0
		} else {
			t.index = meta.Index
		}
	}
	all = make([]*structs.Allocation, 0, len(t.known))
	for _, a := range t.known {
		all = append(all, a)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	return all, changed, nil
}

// assumeClientStatus records that the servers now hold status for
// allocation id, which this client just sent them itself (its own reports
// move ModifyIndex only, which the tracker does not fetch for).
func (t *AllocTracker) assumeClientStatus(id, status string) {
	if a := t.known[id]; a != nil && a.ClientStatus != status {
		c := *a
		c.ClientStatus = status
		t.known[id] = &c
	}
}
