package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// UpsertServiceRegistrations stores service instances at Raft index index
// in one transaction. A registration whose allocation is missing or
// client-terminal, or on another node than the allocation, is skipped: the
// instance is gone (the endpoint checked it, but the allocation may have
// ended before this entry applied). A stored ID keeps its CreateIndex; an
// unchanged one is not written again. Errors wrap structs.ErrInvalid for a
// nil registration or one that fails Validate; then nothing is written.
func (s *StateStore) UpsertServiceRegistrations(index uint64, regs []*structs.ServiceRegistration) error {
	txn := s.writeTxn()
	defer txn.Abort()
	touched := false
	for _, r := range regs {
		if r == nil {
			return invalid("service registration: nil")
		}
		if err := r.Validate(); err != nil {
			return err
		}
		a, err := allocByIDTxn(txn, nil, r.AllocID)
		if err != nil {
			return err
		}
		if a == nil || a.ClientTerminalStatus() || a.NodeID != r.NodeID {
			continue
		}
		existing, err := firstByID[structs.ServiceRegistration](txn, nil, TableServiceRegistrations, "service registration", r.ID)
		if err != nil {
			return err
		}
		c := r.Copy()
		c.CreateIndex, c.ModifyIndex = index, index
		if existing != nil {
			c.CreateIndex = existing.CreateIndex
			c.ModifyIndex = existing.ModifyIndex
			if existing.Equal(c) {
				continue
			}
			c.ModifyIndex = index
		}
		if err := txn.Insert(TableServiceRegistrations, c); err != nil {
			return fmt.Errorf("state: insert service registration %q: %w", c.ID, err)
		}
		touched = true
	}
	if touched {
		if err := setIndex(txn, TableServiceRegistrations, index); err != nil {
			return err
		}
	}
	s.commitTxn(txn, index)
	return nil
}

// DeleteServiceRegistrationsByID removes the registrations with the given
// IDs in namespace ns (any namespace when ns is ""). Unknown IDs are
// skipped.
func (s *StateStore) DeleteServiceRegistrationsByID(index uint64, ns string, ids []string) error {
	txn := s.writeTxn()
	defer txn.Abort()
	touched := false
	for _, id := range ids {
		r, err := firstByID[structs.ServiceRegistration](txn, nil, TableServiceRegistrations, "service registration", id)
		if err != nil {
			return err
		}
		if r == nil || (ns != "" && r.Namespace != ns) {
			continue
		}
		if err := txn.Delete(TableServiceRegistrations, r); err != nil {
			return fmt.Errorf("state: delete service registration %q: %w", id, err)
		}
		touched = true
	}
	if touched {
		if err := setIndex(txn, TableServiceRegistrations, index); err != nil {
			return err
		}
	}
	s.commitTxn(txn, index)
	return nil
}

// DeleteServiceRegistrationsByAllocID removes every registration of the
// allocations.
func (s *StateStore) DeleteServiceRegistrationsByAllocID(index uint64, allocIDs []string) error {
	txn := s.writeTxn()
	defer txn.Abort()
	for _, id := range allocIDs {
		if err := deleteServicesByTxn(txn, index, "alloc", id); err != nil {
			return err
		}
	}
	s.commitTxn(txn, index)
	return nil
}

// deleteServicesByTxn removes the registrations whose index field (alloc
// or node) is value, bumping the table index when any went.
func deleteServicesByTxn(txn *memdb.Txn, index uint64, by, value string) error {
	if value == "" {
		return nil
	}
	regs, err := getAll[structs.ServiceRegistration](txn, nil, TableServiceRegistrations, by, value)
	if err != nil {
		return err
	}
	for _, r := range regs {
		if err := txn.Delete(TableServiceRegistrations, r); err != nil {
			return fmt.Errorf("state: delete service registration %q: %w", r.ID, err)
		}
	}
	if len(regs) > 0 {
		return setIndex(txn, TableServiceRegistrations, index)
	}
	return nil
}

// ServiceRegistrations returns every registration, sorted by ID.
func (s *StateStore) ServiceRegistrations(ws memdb.WatchSet) ([]*structs.ServiceRegistration, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.ServiceRegistration](txn, ws, TableServiceRegistrations, "id")
}

// ServiceRegistrationsByName returns the registrations of service name in
// namespace ns, sorted by ID.
func (s *StateStore) ServiceRegistrationsByName(ws memdb.WatchSet, ns, name string) ([]*structs.ServiceRegistration, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.ServiceRegistration](txn, ws, TableServiceRegistrations, "service", ns, name)
}

// ServiceRegistrationsByAlloc returns the registrations of an allocation.
func (s *StateStore) ServiceRegistrationsByAlloc(ws memdb.WatchSet, allocID string) ([]*structs.ServiceRegistration, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.ServiceRegistration](txn, ws, TableServiceRegistrations, "alloc", allocID)
}

// ServiceRegistrationByID returns the registration or nil.
func (s *StateStore) ServiceRegistrationByID(ws memdb.WatchSet, id string) (*structs.ServiceRegistration, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return firstByID[structs.ServiceRegistration](txn, ws, TableServiceRegistrations, "service registration", id)
}

// ServiceRegistrationRestore inserts a registration from a snapshot.
// Errors wrap structs.ErrInvalid for a nil registration or one without an
// ID.
func (r *StateRestore) ServiceRegistrationRestore(reg *structs.ServiceRegistration) error {
	if reg == nil || reg.ID == "" {
		return invalid("restore service registration: nil or without ID")
	}
	return r.insert(TableServiceRegistrations, reg.ID, reg)
}
