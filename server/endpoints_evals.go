package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// EvalGet returns one evaluation, as a blocking query on the evals table.
// An evaluation that does not exist (still, after the wait) gives an error
// wrapping structs.ErrNotFound.
func (s *Server) EvalGet(ctx context.Context, evalID string, q *structs.QueryOptions) (*structs.Evaluation, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		e, err := st.EvalByID(ws, evalID)
		if err != nil {
			return nil, 0, err
		}
		idx, err := st.Index(state.TableEvals)
		return e, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	e, _ := resp.(*structs.Evaluation)
	if e == nil {
		return nil, meta, fmt.Errorf("evaluation %q: %w", evalID, structs.ErrNotFound)
	}
	return e, meta, nil
}

// EvalList returns the evaluations whose ID starts with q.Prefix, as a
// blocking query on the evals table, in ID order.
func (s *Server) EvalList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Evaluation, structs.QueryMeta, error) {
	prefix := queryPrefix(q)
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		all, err := st.Evals(ws)
		if err != nil {
			return nil, 0, err
		}
		out := []*structs.Evaluation{}
		for _, e := range all {
			if strings.HasPrefix(e.ID, prefix) {
				out = append(out, e)
			}
		}
		idx, err := st.Index(state.TableEvals)
		return out, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.Evaluation), meta, nil
}
