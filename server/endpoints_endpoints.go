package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// This file answers the fleet questions about model-serving endpoints
// (issue 14): which endpoints exist, where they run, how many members
// their node's router admits, and which aliases resolve to them; and it
// promotes and demotes aliases through Raft.

// maxPromotedBy bounds the PromotedBy text kept with an alias, in bytes.
const maxPromotedBy = 512

// AllNamespaces, as a namespace argument, reads every namespace.
const AllNamespaces = "*"

// EndpointList returns the fleet view of every endpoint declared by a job
// of namespace ns (AllNamespaces: every one) whose name starts with
// q.Prefix, sorted by namespace, name and job ID, as a blocking query on
// the jobs, allocations, nodes and endpoint aliases tables. The view is
// read from one state snapshot, so each alias is listed on exactly the
// endpoint it resolves to at the returned index.
func (s *Server) EndpointList(ctx context.Context, ns string, q *structs.QueryOptions) ([]*structs.EndpointView, structs.QueryMeta, error) {
	prefix := queryPrefix(q)
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		snap, err := st.Snapshot()
		if err != nil {
			return nil, 0, err
		}
		views, err := endpointViews(ws, snap, ns, func(name string) bool { return strings.HasPrefix(name, prefix) })
		if err != nil {
			return nil, 0, err
		}
		idx, err := endpointsIndex(snap)
		return views, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.EndpointView), meta, nil
}

// EndpointGet returns the view of endpoint name of namespace ns (a
// blocking query). name may be an alias: an endpoint of that name comes
// first, else the alias's endpoint. Of several jobs declaring the name, a
// live (not stopped) one is returned. An unknown name gives an error
// wrapping structs.ErrNotFound.
func (s *Server) EndpointGet(ctx context.Context, ns, name string, q *structs.QueryOptions) (*structs.EndpointView, structs.QueryMeta, error) {
	// dangling is the endpoint an alias of that name resolves to when no
	// job declares it any more (purged since the promotion).
	var dangling string
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		dangling = ""
		snap, err := st.Snapshot()
		if err != nil {
			return nil, 0, err
		}
		idx, err := endpointsIndex(snap)
		if err != nil {
			return nil, 0, err
		}
		target := name
		views, err := endpointViews(ws, snap, ns, func(n string) bool { return n == target })
		if err != nil {
			return nil, 0, err
		}
		if len(views) == 0 {
			a, err := snap.EndpointAlias(ws, ns, name)
			if err != nil {
				return nil, 0, err
			}
			if a == nil {
				return (*structs.EndpointView)(nil), idx, nil
			}
			target = a.Endpoint
			if views, err = endpointViews(ws, snap, ns, func(n string) bool { return n == target }); err != nil {
				return nil, 0, err
			}
			if len(views) == 0 {
				dangling = a.Endpoint
			}
		}
		for _, v := range views {
			if v.Status != structs.EndpointStatusStopped {
				return v, idx, nil
			}
		}
		if len(views) > 0 {
			return views[0], idx, nil
		}
		return (*structs.EndpointView)(nil), idx, nil
	})
	if err != nil {
		return nil, meta, err
	}
	v, _ := resp.(*structs.EndpointView)
	if v == nil && dangling != "" {
		return nil, meta, fmt.Errorf("alias %q in namespace %q resolves to endpoint %q, which no job declares any more (its job was purged): promote the alias onto another endpoint or demote it: %w",
			name, ns, dangling, structs.ErrNotFound)
	}
	if v == nil {
		return nil, meta, fmt.Errorf("endpoint or alias %q in namespace %q: %w", name, ns, structs.ErrNotFound)
	}
	return v, meta, nil
}

// EndpointAliasList returns the aliases of namespace ns (AllNamespaces:
// every one), sorted by namespace and name, as a blocking query on the
// endpoint aliases table.
func (s *Server) EndpointAliasList(ctx context.Context, ns string, q *structs.QueryOptions) ([]*structs.EndpointAlias, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		var as []*structs.EndpointAlias
		var err error
		if ns == AllNamespaces {
			as, err = st.EndpointAliases(ws)
		} else {
			as, err = st.EndpointAliasesByNamespace(ws, ns)
		}
		if err != nil {
			return nil, 0, err
		}
		idx, err := st.Index(state.TableEndpointAliases)
		return as, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.EndpointAlias), meta, nil
}

// EndpointAliasPromote points alias args.Alias at endpoint args.Endpoint
// of args.Namespace in one Raft entry (type EndpointAliasPromote), keeping
// who (args.PromotedBy) and when (this server's clock, in the entry). The
// endpoint must be declared by exactly one live job of the namespace and
// have a placed member, none of them on an opportunistic node; the FSM
// checks the same again at apply. It returns the stored alias and the
// entry's index. Errors wrap structs.ErrInvalid (bad names,
// structs.ErrEndpointOpportunistic, structs.ErrEndpointNotPlaced, an
// endpoint declared by two live jobs), structs.ErrNotFound (no live job
// declares it) and the write errors of raftApply.
func (s *Server) EndpointAliasPromote(ctx context.Context, args *structs.EndpointAliasPromoteArgs) (*structs.EndpointAlias, uint64, error) {
	if args == nil {
		return nil, 0, fmt.Errorf("%w: endpoint alias promote: no arguments", structs.ErrInvalid)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.EndpointAliasPromote(fctx, args)
	}
	if err := s.readyForWrites(); err != nil {
		return nil, 0, err
	}
	ns := args.Namespace
	if ns == "" {
		ns = "default"
	}
	if err := structs.ValidateEndpointAliasName("alias", args.Alias); err != nil {
		return nil, 0, err
	}
	if args.Alias == structs.ReservedEndpointName {
		// Checked here, not in the stored alias's Validate, so that a log
		// written before the rule still applies.
		return nil, 0, fmt.Errorf("%w: alias: %q is reserved (GET /v1/endpoint/%s lists the aliases)", structs.ErrInvalid, args.Alias, structs.ReservedEndpointName)
	}
	if err := structs.ValidateEndpointAliasName("Endpoint", args.Endpoint); err != nil {
		return nil, 0, err
	}
	by := args.PromotedBy
	if by == "" {
		by = "anonymous"
	}
	if len(by) > maxPromotedBy {
		return nil, 0, fmt.Errorf("%w: PromotedBy: at most %d bytes", structs.ErrInvalid, maxPromotedBy)
	}
	st := s.fsm.State()
	jobs, err := st.Jobs(nil)
	if err != nil {
		return nil, 0, err
	}
	var declaring []*structs.Job
	for _, j := range jobs {
		if j.Namespace == ns && !j.Stop && structs.FindEndpointGroup(j, args.Endpoint) != nil {
			declaring = append(declaring, j)
		}
	}
	switch len(declaring) {
	case 0:
		return nil, 0, fmt.Errorf("endpoint %q: no live job of namespace %q declares it: %w", args.Endpoint, ns, structs.ErrNotFound)
	case 1:
	default:
		return nil, 0, fmt.Errorf("%w: endpoint %q is declared by %d live jobs (%s and %s)", structs.ErrInvalid, args.Endpoint, len(declaring), declaring[0].ID, declaring[1].ID)
	}
	alias := &structs.EndpointAlias{Namespace: ns, Name: args.Alias, Endpoint: args.Endpoint, JobID: declaring[0].ID,
		PromotedBy: by, PromotedAt: time.Now().UnixNano()}
	if err := st.CheckEndpointAliasPromotable(alias); err != nil {
		return nil, 0, err
	}
	_, index, err := s.raftApply(structs.EndpointAliasPromoteRequestType, &structs.EndpointAliasPromoteRequest{Alias: alias})
	if err != nil {
		return nil, index, fmt.Errorf("promote alias %q: %w", args.Alias, err)
	}
	stored, err := s.fsm.State().EndpointAlias(nil, ns, args.Alias)
	if err != nil {
		return nil, index, err
	}
	if stored == nil {
		// Demoted again right after the entry applied.
		stored = alias
	}
	return stored, index, nil
}

// EndpointAliasDemote removes alias of namespace ns in one Raft entry
// (type EndpointAliasDelete) and returns its index. Errors wrap
// structs.ErrInvalid (a bad name), structs.ErrNotFound (not promoted)
// and the write errors of raftApply.
func (s *Server) EndpointAliasDemote(ctx context.Context, ns, alias string) (uint64, error) {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.EndpointAliasDemote(fctx, ns, alias)
	}
	if err := s.readyForWrites(); err != nil {
		return 0, err
	}
	if ns == "" {
		ns = "default"
	}
	if err := structs.ValidateEndpointAliasName("alias", alias); err != nil {
		return 0, err
	}
	a, err := s.fsm.State().EndpointAlias(nil, ns, alias)
	if err != nil {
		return 0, err
	}
	if a == nil {
		return 0, fmt.Errorf("alias %q in namespace %q: %w", alias, ns, structs.ErrNotFound)
	}
	_, index, err := s.raftApply(structs.EndpointAliasDeleteRequestType, &structs.EndpointAliasDeleteRequest{Namespace: ns, Name: alias})
	if err != nil {
		return index, fmt.Errorf("demote alias %q: %w", alias, err)
	}
	return index, nil
}

// endpointsIndex is the index of an endpoints read: the newest change of
// the tables it reads.
func endpointsIndex(snap *state.StateSnapshot) (uint64, error) {
	var max uint64
	for _, t := range []string{state.TableJobs, state.TableAllocs, state.TableNodes, state.TableEndpointAliases} {
		idx, err := snap.Index(t)
		if err != nil {
			return 0, err
		}
		if idx > max {
			max = idx
		}
	}
	return max, nil
}

// endpointViews builds the views of the endpoints of namespace ns
// (AllNamespaces: every one) whose name keep accepts, from snap, watching
// what it read in ws.
func endpointViews(ws memdb.WatchSet, snap *state.StateSnapshot, ns string, keep func(string) bool) ([]*structs.EndpointView, error) {
	jobs, err := snap.Jobs(ws)
	if err != nil {
		return nil, err
	}
	aliases, err := snap.EndpointAliases(ws)
	if err != nil {
		return nil, err
	}
	byEndpoint := map[string][]string{}
	for _, a := range aliases {
		k := a.Namespace + "\x00" + a.Endpoint
		byEndpoint[k] = append(byEndpoint[k], a.Name)
	}
	var out []*structs.EndpointView
	for _, j := range jobs {
		if ns != AllNamespaces && j.Namespace != ns {
			continue
		}
		var allocs []*structs.Allocation
		read := false
		for _, tg := range j.TaskGroups {
			if tg == nil || tg.Endpoint == nil || !keep(tg.Endpoint.Name) {
				continue
			}
			if !read {
				if allocs, err = snap.AllocsByJob(ws, j.ID); err != nil {
					return nil, err
				}
				read = true
			}
			v, err := endpointView(ws, snap, j, tg, allocs)
			if err != nil {
				return nil, err
			}
			// A stopped job's endpoint is no alias target: an alias
			// resolves to the live declaration (or to nothing live).
			v.Aliases = byEndpoint[j.Namespace+"\x00"+tg.Endpoint.Name]
			out = append(out, v)
		}
	}
	// An alias is listed on one endpoint: of several declarations of its
	// name, the live one (the first when none or several are live).
	owner := map[string]int{}
	for i, v := range out {
		k := v.Namespace + "\x00" + v.Name
		if o, ok := owner[k]; !ok || (out[o].Status == structs.EndpointStatusStopped && v.Status != structs.EndpointStatusStopped) {
			owner[k] = i
		}
	}
	for i, v := range out {
		if owner[v.Namespace+"\x00"+v.Name] != i {
			v.Aliases = nil
		}
	}
	slices.SortStableFunc(out, func(a, b *structs.EndpointView) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.JobID, b.JobID)
	})
	return out, nil
}

// endpointView is group tg's endpoint as the fleet sees it.
func endpointView(ws memdb.WatchSet, snap *state.StateSnapshot, job *structs.Job, tg *structs.TaskGroup, allocs []*structs.Allocation) (*structs.EndpointView, error) {
	ep := tg.Endpoint
	v := &structs.EndpointView{Namespace: job.Namespace, Name: ep.Name, JobID: job.ID, JobVersion: job.Version, Group: tg.Name,
		Model: ep.Model, Revision: ep.Revision, Port: ep.Port, Count: tg.Count}
	running := 0
	for _, a := range structs.LiveEndpointMembers(allocs, tg.Name) {
		m := &structs.EndpointMemberView{AllocID: a.ID, Index: a.Index(), NodeID: a.NodeID, ClientStatus: a.ClientStatus}
		if em := a.EndpointMember; em != nil {
			m.Admitted, m.Reason, m.Identity = em.Admitted, em.Reason, em.Identity
		}
		if m.Admitted {
			v.Admitted++
		}
		if a.ClientStatus == structs.AllocClientStatusRunning {
			running++
		}
		if v.NodeID == "" && a.NodeID != "" {
			v.NodeID = a.NodeID
		}
		v.MemberList = append(v.MemberList, m)
	}
	slices.SortStableFunc(v.MemberList, func(a, b *structs.EndpointMemberView) int { return a.Index - b.Index })
	v.Members = len(v.MemberList)
	if v.NodeID != "" {
		n, err := snap.NodeByID(ws, v.NodeID)
		if err != nil {
			return nil, err
		}
		if n != nil {
			v.NodeName = n.Name
			v.NodeAvailability = structs.AvailabilityContinuous
			if n.IsOpportunistic() {
				v.NodeAvailability = structs.AvailabilityOpportunistic
			}
		}
	}
	switch {
	case job.Stop:
		v.Status = structs.EndpointStatusStopped
	case v.Admitted > 0:
		v.Status = structs.EndpointStatusServing
	case running > 0:
		v.Status = structs.EndpointStatusDegraded
	default:
		v.Status = structs.EndpointStatusDown
	}
	return v, nil
}
