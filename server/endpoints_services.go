package server

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// NodeServices applies a client's service instance changes for node
// nodeID: upserts first, then deletes, each list in one Raft entry
// (types ServiceRegistrationUpsert, ServiceRegistrationDeleteByID,
// ServiceRegistrationDeleteByAllocID). Every registration must be of a
// live allocation placed on nodeID; the server fills Namespace, JobID,
// NodeID and Datacenter from the allocation and its node, so a client
// cannot register under another job or namespace. Deletes name only
// registrations and allocations of nodeID. Errors wrap structs.ErrInvalid
// (a bad registration, a batch over MaxNodeServicesBatch),
// structs.ErrPermissionDenied (an allocation or registration of another
// node), structs.ErrNotFound (an unknown allocation), and the write
// errors of UpdateAllocs. Nothing is applied when the request is refused.
func (s *Server) NodeServices(ctx context.Context, nodeID string, req *structs.NodeServicesRequest) error {
	if req == nil {
		return nil
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.NodeServices(fctx, nodeID, req)
	}
	if err := s.readyForWrites(); err != nil {
		return err
	}
	if len(req.Upsert) > structs.MaxNodeServicesBatch || len(req.Delete) > structs.MaxNodeServicesBatch || len(req.DeleteAllocs) > structs.MaxNodeServicesBatch {
		return fmt.Errorf("%w: service registrations: at most %d per list", structs.ErrInvalid, structs.MaxNodeServicesBatch)
	}
	store := s.fsm.State()
	node, err := store.NodeByID(nil, nodeID)
	if err != nil {
		return err
	}
	if node == nil {
		return fmt.Errorf("node %q: %w", nodeID, structs.ErrNotFound)
	}
	ownAlloc := func(id string) (*structs.Allocation, error) {
		a, err := store.AllocByID(nil, id)
		if err != nil {
			return nil, err
		}
		if a == nil {
			return nil, fmt.Errorf("service registration: allocation %q: %w", id, structs.ErrNotFound)
		}
		if a.NodeID != nodeID {
			return nil, fmt.Errorf("service registration: allocation %q is not on node %q: %w", id, nodeID, structs.ErrPermissionDenied)
		}
		return a, nil
	}
	var upserts []*structs.ServiceRegistration
	for i, r := range req.Upsert {
		if r == nil {
			return fmt.Errorf("%w: Upsert[%d]: must not be null", structs.ErrInvalid, i)
		}
		a, err := ownAlloc(r.AllocID)
		if err != nil {
			return err
		}
		if a.ClientTerminalStatus() {
			continue // finished: nothing to register
		}
		c := r.Copy()
		c.Namespace, c.JobID, c.NodeID, c.Datacenter = a.Namespace, a.JobID, nodeID, node.Datacenter
		if c.Namespace == "" {
			c.Namespace = "default"
		}
		c.CreateIndex, c.ModifyIndex = 0, 0
		if err := c.Validate(); err != nil {
			return fmt.Errorf("service registration Upsert[%d]: %w", i, err)
		}
		if err := declaredInstance(a, node, c); err != nil {
			return fmt.Errorf("service registration Upsert[%d]: %w", i, err)
		}
		// A client's periodic resend of an unchanged instance costs no
		// Raft entry.
		stored, err := store.ServiceRegistrationByID(nil, c.ID)
		if err != nil {
			return err
		}
		if stored.Equal(c) {
			continue
		}
		upserts = append(upserts, c)
	}
	var dels []string
	for _, id := range req.Delete {
		r, err := store.ServiceRegistrationByID(nil, id)
		if err != nil {
			return err
		}
		if r == nil {
			continue
		}
		if r.NodeID != nodeID {
			return fmt.Errorf("service registration %q is not on node %q: %w", id, nodeID, structs.ErrPermissionDenied)
		}
		dels = append(dels, id)
	}
	var allocs []string
	for _, id := range req.DeleteAllocs {
		a, err := store.AllocByID(nil, id)
		if err != nil {
			return err
		}
		if a == nil {
			continue // collected: its registrations went with it
		}
		if a.NodeID != nodeID {
			return fmt.Errorf("service registration: allocation %q is not on node %q: %w", id, nodeID, structs.ErrPermissionDenied)
		}
		allocs = append(allocs, id)
	}
	if len(upserts) > 0 {
		if _, _, err := s.raftApply(structs.ServiceRegistrationUpsertRequestType, &structs.ServiceRegistrationUpsertRequest{Services: upserts}); err != nil {
			return fmt.Errorf("service registrations: %w", err)
		}
	}
	if len(dels) > 0 {
		if _, _, err := s.raftApply(structs.ServiceRegistrationDeleteByIDRequestType, &structs.ServiceRegistrationDeleteByIDRequest{IDs: dels}); err != nil {
			return fmt.Errorf("service registrations: %w", err)
		}
	}
	if len(allocs) > 0 {
		if _, _, err := s.raftApply(structs.ServiceRegistrationDeleteByAllocIDRequestType, &structs.ServiceRegistrationDeleteByAllocIDRequest{AllocIDs: allocs}); err != nil {
			return fmt.Errorf("service registrations: %w", err)
		}
	}
	return nil
}

// ServiceRegistrations returns every service registration sorted by
// namespace, service name and ID, as a blocking query on the
// registrations table. Callers filter by namespace.
func (s *Server) ServiceRegistrations(ctx context.Context, q *structs.QueryOptions) ([]*structs.ServiceRegistration, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		regs, err := st.ServiceRegistrations(ws)
		if err != nil {
			return nil, 0, err
		}
		sort.SliceStable(regs, func(i, j int) bool {
			a, b := regs[i], regs[j]
			if a.Namespace != b.Namespace {
				return a.Namespace < b.Namespace
			}
			return a.ServiceName < b.ServiceName
		})
		idx, err := st.Index(state.TableServiceRegistrations)
		return regs, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	regs, _ := resp.([]*structs.ServiceRegistration)
	return regs, meta, nil
}

// ServiceRegistrationsByName returns the registrations of service name in
// namespace ns (every instance), as a blocking query. An unknown name is
// an empty list, as in Nomad.
func (s *Server) ServiceRegistrationsByName(ctx context.Context, ns, name string, q *structs.QueryOptions) ([]*structs.ServiceRegistration, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		regs, err := st.ServiceRegistrationsByName(ws, ns, name)
		if err != nil {
			return nil, 0, err
		}
		idx, err := st.Index(state.TableServiceRegistrations)
		return regs, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	regs, _ := resp.([]*structs.ServiceRegistration)
	return regs, meta, nil
}

// DeleteServiceRegistration removes registration id of service name in
// namespace ns (an operator's DELETE /v1/service/:name/:id). It returns
// an error wrapping structs.ErrNotFound when there is none, and the write
// errors of UpdateAllocs. The client of a healthy instance registers it
// again at its next check.
func (s *Server) DeleteServiceRegistration(ctx context.Context, ns, name, id string) error {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.DeleteServiceRegistration(fctx, ns, name, id)
	}
	if err := s.readyForWrites(); err != nil {
		return err
	}
	r, err := s.fsm.State().ServiceRegistrationByID(nil, id)
	if err != nil {
		return err
	}
	if r == nil || r.Namespace != ns || r.ServiceName != name {
		return fmt.Errorf("service %q registration %q: %w", name, id, structs.ErrNotFound)
	}
	if _, _, err := s.raftApply(structs.ServiceRegistrationDeleteByIDRequestType, &structs.ServiceRegistrationDeleteByIDRequest{Namespace: ns, IDs: []string{id}}); err != nil {
		return fmt.Errorf("delete service registration: %w", err)
	}
	return nil
}

// declaredInstance checks that r is an instance the allocation's job
// declares: its ID is the one the client builds for one of the group's
// services (so a node cannot take over another node's registration by
// sending its ID), its name is that service's, its port is the host port
// the allocation holds for the service's label (0 without one) and its
// address is the node's or that port's. A node can therefore not point a
// service at an arbitrary host:port. Errors wrap ErrPermissionDenied.
func declaredInstance(a *structs.Allocation, node *structs.Node, r *structs.ServiceRegistration) error {
	var tg *structs.TaskGroup
	if a.Job != nil {
		tg = a.Job.LookupTaskGroup(a.TaskGroup)
	}
	if tg == nil {
		return fmt.Errorf("allocation %q has no group %q: %w", a.ID, a.TaskGroup, structs.ErrPermissionDenied)
	}
	var shared *structs.AllocatedSharedResources
	if a.AllocatedResources != nil {
		shared = a.AllocatedResources.Shared
	}
	for _, s := range tg.GroupServices() {
		if s == nil {
			continue
		}
		owner := tg.Name
		if s.TaskName != "" {
			owner = s.TaskName
		}
		if structs.ServiceRegistrationID(a.ID, owner, s.Name, s.PortLabel) != r.ID {
			continue
		}
		if r.ServiceName != s.Name {
			return fmt.Errorf("ID %q is service %q, not %q: %w", r.ID, s.Name, r.ServiceName, structs.ErrPermissionDenied)
		}
		port, addrs := 0, []string{node.HostIP()}
		if pm, ok := shared.Port(s.PortLabel); ok {
			port = pm.Value
			if pm.HostIP != "" {
				addrs = append(addrs, pm.HostIP)
			}
		}
		if r.Port != port {
			return fmt.Errorf("service registration: Port: %d is not the port allocation %q holds for service %q (%d): %w", r.Port, a.ID, s.Name, port, structs.ErrPermissionDenied)
		}
		if !slices.Contains(addrs, r.Address) {
			return fmt.Errorf("service registration: Address: %q is not the address of node %q or of the port of service %q: %w", r.Address, node.ID, s.Name, structs.ErrPermissionDenied)
		}
		return nil
	}
	return fmt.Errorf("ID %q is not an instance of a service of allocation %q: %w", r.ID, a.ID, structs.ErrPermissionDenied)
}
