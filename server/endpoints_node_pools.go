package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// UpsertNodePools creates or replaces node pools (Nomad's PUT
// /v1/node/pools) in one Raft entry (type NodePoolUpsert) and returns its
// index. Indexes in the input are ignored. It returns errors wrapping
// structs.ErrInvalid for no pools or more than
// structs.MaxNodePoolsPerRequest, a pool that fails Validate, a name given
// twice, the built-in "all" (which cannot be modified), a provider config
// naming a program, image or binary this server's agent config does not
// allow (checkPoolProvider), or a scaling policy whose provider config the
// provider refuses (checkProviderConfig, on the leader); and errors
// wrapping structs.ErrNotLeader or structs.ErrShutdown. Nothing is written
// when the request is refused.
func (s *Server) UpsertNodePools(ctx context.Context, pools []*structs.NodePool) (uint64, error) {
	if len(pools) == 0 || len(pools) > structs.MaxNodePoolsPerRequest {
		return 0, fmt.Errorf("node pool upsert: %w: between 1 and %d pools, got %d", structs.ErrInvalid, structs.MaxNodePoolsPerRequest, len(pools))
	}
	out := make([]*structs.NodePool, 0, len(pools))
	seen := make(map[string]bool, len(pools))
	for i, p := range pools {
		if p == nil {
			return 0, fmt.Errorf("node pool upsert: %w: NodePools[%d]: must not be null", structs.ErrInvalid, i)
		}
		if err := p.Validate(); err != nil {
			return 0, fmt.Errorf("node pool upsert: %w", err)
		}
		if err := s.config.Provision.checkPoolProvider(p); err != nil {
			return 0, fmt.Errorf("node pool upsert: %w", err)
		}
		if p.Name == structs.NodePoolAll {
			return 0, fmt.Errorf("node pool upsert: %w: node pool %q is built-in and cannot be modified", structs.ErrInvalid, p.Name)
		}
		if seen[p.Name] {
			return 0, fmt.Errorf("node pool upsert: %w: node pool %q given twice", structs.ErrInvalid, p.Name)
		}
		seen[p.Name] = true
		c := p.Copy()
		c.CreateIndex, c.ModifyIndex = 0, 0
		out = append(out, c)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.UpsertNodePools(fctx, out)
	}
	if err := s.readyForWrites(); err != nil {
		return 0, err
	}
	// On the leader, where the provider runs: a provider config it would
	// refuse at the first create is refused now, not when work is blocked.
	for _, p := range out {
		if err := checkProviderConfig(p); err != nil {
			return 0, fmt.Errorf("node pool upsert: %w: node pool %q: scaling: config: %v", structs.ErrInvalid, p.Name, err)
		}
	}
	_, index, err := s.raftApply(structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: out})
	if err != nil {
		return 0, fmt.Errorf("node pool upsert: %w", err)
	}
	return index, nil
}

// DeleteNodePool deletes pool name (Nomad's DELETE /v1/node/pool/:name) and
// returns the Raft index. It returns errors wrapping structs.ErrNotFound
// for an unknown pool, structs.ErrInvalid for a built-in pool ("default",
// "all") or one that a node or a live job (status not dead) is in, and
// structs.ErrNotLeader or structs.ErrShutdown. The FSM checks the pool's
// use again when it applies the entry, so a node that registers into the
// pool meanwhile makes the delete fail rather than leave it without a row.
func (s *Server) DeleteNodePool(ctx context.Context, name string) (uint64, error) {
	if structs.IsBuiltinNodePool(name) {
		return 0, fmt.Errorf("node pool delete: %w: node pool %q is built-in and cannot be deleted", structs.ErrInvalid, name)
	}
	if !structs.ValidNodePoolName(name) {
		return 0, fmt.Errorf("node pool delete: %w: node pool name %q is malformed", structs.ErrInvalid, truncateForError(name))
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.DeleteNodePool(fctx, name)
	}
	if err := s.readyForWrites(); err != nil {
		return 0, err
	}
	p, err := s.fsm.State().NodePoolByName(nil, name)
	if err != nil {
		return 0, fmt.Errorf("node pool delete: %w", err)
	}
	if p == nil {
		return 0, fmt.Errorf("node pool %q: %w", name, structs.ErrNotFound)
	}
	_, index, err := s.raftApply(structs.NodePoolDeleteRequestType, &structs.NodePoolDeleteRequest{Names: []string{name}})
	if err != nil {
		return 0, fmt.Errorf("node pool delete: %w", err)
	}
	return index, nil
}

// NodePools returns every pool whose name starts with q.Prefix, the
// built-ins included, sorted by name, as a blocking query on the node
// pools table.
func (s *Server) NodePools(ctx context.Context, q *structs.QueryOptions) ([]*structs.NodePool, structs.QueryMeta, error) {
	prefix := queryPrefix(q)
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		pools, err := st.NodePools(ws)
		if err != nil {
			return nil, 0, err
		}
		out := make([]*structs.NodePool, 0, len(pools))
		for _, p := range pools {
			if strings.HasPrefix(p.Name, prefix) {
				out = append(out, p)
			}
		}
		idx, err := st.Index(state.TableNodePools)
		return out, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.NodePool), meta, nil
}

// NodePoolGet returns pool name as a blocking query on the node pools
// table, or an error wrapping structs.ErrNotFound.
func (s *Server) NodePoolGet(ctx context.Context, name string, q *structs.QueryOptions) (*structs.NodePool, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		p, err := st.NodePoolByName(ws, name)
		if err != nil {
			return nil, 0, err
		}
		idx, err := st.Index(state.TableNodePools)
		return p, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	p, _ := resp.(*structs.NodePool)
	if p == nil {
		return nil, meta, fmt.Errorf("node pool %q: %w", name, structs.ErrNotFound)
	}
	return p, meta, nil
}

// NodePoolNodes returns the nodes of pool name (every node for "all"),
// without their secrets, sorted by ID, as a blocking query on the nodes
// table. It returns an error wrapping structs.ErrNotFound for an unknown
// pool.
func (s *Server) NodePoolNodes(ctx context.Context, name string, q *structs.QueryOptions) ([]*structs.Node, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		p, err := st.NodePoolByName(ws, name)
		if err != nil {
			return nil, 0, err
		}
		if p == nil {
			return nil, 0, fmt.Errorf("node pool %q: %w", name, structs.ErrNotFound)
		}
		nodes, err := st.NodesByNodePool(ws, name)
		if err != nil {
			return nil, 0, err
		}
		out := make([]*structs.Node, 0, len(nodes))
		for _, n := range nodes {
			out = append(out, n.Stub())
		}
		idx, err := maxIndex(st, state.TableNodes, state.TableNodePools)
		return out, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Node), meta, nil
}

// NodePoolJobs returns the jobs of pool name (for "all", the jobs that ask
// for every node), sorted by ID, as a blocking query on the jobs table. It
// returns an error wrapping structs.ErrNotFound for an unknown pool.
func (s *Server) NodePoolJobs(ctx context.Context, name string, q *structs.QueryOptions) ([]*structs.Job, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		p, err := st.NodePoolByName(ws, name)
		if err != nil {
			return nil, 0, err
		}
		if p == nil {
			return nil, 0, fmt.Errorf("node pool %q: %w", name, structs.ErrNotFound)
		}
		jobs, err := st.JobsByNodePool(ws, name)
		if err != nil {
			return nil, 0, err
		}
		idx, err := maxIndex(st, state.TableJobs, state.TableNodePools)
		return jobs, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Job), meta, nil
}

// maxIndex returns the highest Raft index of tables.
func maxIndex(st *state.StateStore, tables ...string) (uint64, error) {
	var max uint64
	for _, t := range tables {
		v, err := st.Index(t)
		if err != nil {
			return 0, err
		}
		if v > max {
			max = v
		}
	}
	return max, nil
}

// checkJobNodePool refuses a job whose NodePool is malformed or names a
// pool that does not exist (Nomad's job register admission). Errors wrap
// structs.ErrInvalid.
func (s *Server) checkJobNodePool(job *structs.Job) error {
	name := job.NodePool
	if name == "" {
		return nil
	}
	if !structs.ValidNodePoolName(name) {
		return fmt.Errorf("%w: job %q: node_pool %q (%d bytes): must be 1 to %d letters, digits, '-' or '_'", structs.ErrInvalid, truncateForError(job.ID), truncateForError(name), len(name), structs.MaxNodePoolNameLen)
	}
	p, err := s.fsm.State().NodePoolByName(nil, name)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("%w: job %q: node pool %q does not exist", structs.ErrInvalid, job.ID, name)
	}
	return nil
}
