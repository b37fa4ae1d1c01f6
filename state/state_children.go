package state

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// Children of periodic and parameterized jobs: the periodic launch table,
// the registration of a child (launched or dispatched) and the release of
// held children (max_running_children). Each write is one transaction, so
// a reader never sees a child without its evaluation or a launch without
// its record.

// Skip reasons of a scheduled launch (ChildLaunchResult.Skipped).
const (
	SkipDecided = "launch time already decided"
	SkipOverlap = "prohibit_overlap: a child is still running"
)

// JobChildren returns the children of parentID (jobs whose ParentID it
// is), in the order they were created (CreateIndex, then ID).
func (s *StateStore) JobChildren(ws memdb.WatchSet, parentID string) ([]*structs.Job, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return childrenTxn(txn, ws, parentID)
}

func childrenTxn(txn *memdb.Txn, ws memdb.WatchSet, parentID string) ([]*structs.Job, error) {
	if parentID == "" {
		return nil, nil
	}
	out, err := getAll[structs.Job](txn, ws, TableJobs, "parent", parentID)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *structs.Job) int {
		return cmp.Or(cmp.Compare(a.CreateIndex, b.CreateIndex), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// ChildRunning reports whether a child counts against its parent's
// max_running_children: released (not held) and not dead. A child
// waiting for placement (pending) counts: it holds its place.
func ChildRunning(c *structs.Job) bool { return !c.Held && c.Status != structs.JobStatusDead }

// ChildAlive reports whether a child blocks a prohibit_overlap launch:
// not dead, held or not.
func ChildAlive(c *structs.Job) bool { return c.Status != structs.JobStatusDead }

// ChildWaiting reports whether a child is held and not stopped, waiting
// to be released.
func ChildWaiting(c *structs.Job) bool { return c.Held && !c.Stop }

// PeriodicLaunchByID returns the periodic job's launch record, or nil.
func (s *StateStore) PeriodicLaunchByID(ws memdb.WatchSet, id string) (*structs.PeriodicLaunch, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return firstByID[structs.PeriodicLaunch](txn, ws, TablePeriodicLaunch, "periodic launch", id)
}

// PeriodicLaunches returns every launch record, sorted by job ID.
func (s *StateStore) PeriodicLaunches(ws memdb.WatchSet) ([]*structs.PeriodicLaunch, error) {
	txn := s.db.Txn(false)
	defer txn.Abort()
	return getAll[structs.PeriodicLaunch](txn, ws, TablePeriodicLaunch, "id")
}

func deletePeriodicLaunchTxn(txn *memdb.Txn, index uint64, jobID string) error {
	existing, err := firstByID[structs.PeriodicLaunch](txn, nil, TablePeriodicLaunch, "periodic launch", jobID)
	if err != nil || existing == nil {
		return err
	}
	if err := txn.Delete(TablePeriodicLaunch, existing); err != nil {
		return fmt.Errorf("state: delete periodic launch %q: %w", jobID, err)
	}
	return setIndex(txn, TablePeriodicLaunch, index)
}

// ApplyPeriodicLaunch applies a launch (see structs.PeriodicLaunchRequest):
// a scheduled launch at or before the recorded last launch is skipped
// (SkipDecided); one whose child exists already (a forced launch in the
// same second) is recorded and skipped (SkipDecided); a forced one whose
// child exists is a no-op naming it; with
// prohibit_overlap and a child alive it is recorded and skipped
// (SkipOverlap); otherwise the child is registered (held when the
// parent's max_running_children is reached) with its evaluation (none when
// held) and a scheduled launch is recorded. Errors wrap structs.ErrInvalid
// (malformed request, child not named for its parent) or
// structs.ErrNotFound (no such periodic parent); nothing is written then.
func (s *StateStore) ApplyPeriodicLaunch(index uint64, req *structs.PeriodicLaunchRequest) (*structs.ChildLaunchResult, error) {
	if req == nil || req.Child == nil || req.Eval == nil || req.Eval.ID == "" {
		return nil, invalid("periodic launch: missing child or evaluation")
	}
	if req.Child.ID != structs.PeriodicChildID(req.ParentID, req.Launch) || req.Child.ParentID != req.ParentID ||
		req.Eval.JobID != req.Child.ID {
		return nil, invalid("periodic launch: child %q or its evaluation is not named for %q at %d", req.Child.ID, req.ParentID, req.Launch)
	}
	txn := s.writeTxn()
	defer txn.Abort()
	parent, err := jobByIDTxn(txn, nil, req.ParentID)
	if err != nil {
		return nil, err
	}
	if parent == nil || !parent.IsPeriodic() {
		return nil, notFound("periodic job", req.ParentID)
	}
	res := &structs.ChildLaunchResult{JobID: req.Child.ID}
	existing, err := jobByIDTxn(txn, nil, req.Child.ID)
	if err != nil {
		return nil, err
	}
	if existing != nil && req.Forced {
		res.Skipped = SkipDecided
		return res, nil
	}
	children, err := childrenTxn(txn, nil, parent.ID)
	if err != nil {
		return nil, err
	}
	if existing != nil {
		// A forced launch took this second: the scheduled time is
		// decided all the same, so record it below and launch nothing.
		res.Skipped = SkipDecided
	}
	if !req.Forced {
		last, err := firstByID[structs.PeriodicLaunch](txn, nil, TablePeriodicLaunch, "periodic launch", parent.ID)
		if err != nil {
			return nil, err
		}
		if last != nil && last.Launch >= req.Launch {
			res.Skipped = SkipDecided
			return res, nil
		}
		rec := &structs.PeriodicLaunch{ID: parent.ID, Namespace: parent.Namespace, Launch: req.Launch, CreateIndex: index, ModifyIndex: index}
		if last != nil {
			rec.CreateIndex = last.CreateIndex
		}
		if err := txn.Insert(TablePeriodicLaunch, rec); err != nil {
			return nil, fmt.Errorf("state: insert periodic launch %q: %w", parent.ID, err)
		}
		if err := setIndex(txn, TablePeriodicLaunch, index); err != nil {
			return nil, err
		}
		if res.Skipped == "" && parent.Periodic.ProhibitOverlap && slices.ContainsFunc(children, ChildAlive) {
			res.Skipped = SkipOverlap
		}
	}
	if res.Skipped == "" {
		if err := registerChildTxn(txn, index, parent, children, req.Child, req.Eval, res); err != nil {
			return nil, err
		}
	}
	s.commitTxn(txn, index)
	return res, nil
}

// ApplyJobDispatch registers a dispatched child (see
// structs.JobDispatchRequest). A child of the same parent with the same
// idempotency token, or a job with the child's ID, makes it a no-op that
// names that child. Errors wrap structs.ErrInvalid or structs.ErrNotFound
// (no such parameterized parent); nothing is written then.
func (s *StateStore) ApplyJobDispatch(index uint64, req *structs.JobDispatchRequest) (*structs.ChildLaunchResult, error) {
	if req == nil || req.Child == nil || req.Eval == nil || req.Eval.ID == "" || req.Eval.JobID != req.Child.ID {
		return nil, invalid("job dispatch: missing child or evaluation")
	}
	c := req.Child
	if !c.Dispatched || c.ParentID == "" {
		return nil, invalid("job dispatch: child %q is not marked dispatched with a parent", c.ID)
	}
	txn := s.writeTxn()
	defer txn.Abort()
	parent, err := jobByIDTxn(txn, nil, c.ParentID)
	if err != nil {
		return nil, err
	}
	if parent == nil || !parent.IsParameterized() {
		return nil, notFound("parameterized job", c.ParentID)
	}
	res := &structs.ChildLaunchResult{JobID: c.ID}
	if existing, err := jobByIDTxn(txn, nil, c.ID); err != nil || existing != nil {
		return res, err
	}
	children, err := childrenTxn(txn, nil, parent.ID)
	if err != nil {
		return nil, err
	}
	if tok := c.DispatchIdempotencyToken; tok != "" {
		for _, ch := range children {
			if ch.DispatchIdempotencyToken == tok {
				res.JobID = ch.ID
				return res, nil
			}
		}
	}
	if err := registerChildTxn(txn, index, parent, children, c, req.Eval, res); err != nil {
		return nil, err
	}
	s.commitTxn(txn, index)
	return res, nil
}

// registerChildTxn upserts child, held when parent's max_running_children
// leaves no room or an older sibling already waits (order of creation),
// and its evaluation unless held.
func registerChildTxn(txn *memdb.Txn, index uint64, parent *structs.Job, siblings []*structs.Job, child *structs.Job,
	eval *structs.Evaluation, res *structs.ChildLaunchResult) error {
	c, err := safeCopy("job", child.ID, child.Copy)
	if err != nil {
		return err
	}
	c.Held = false
	if limit := parent.MaxRunningChildren; limit > 0 {
		running := 0
		for _, s := range siblings {
			if ChildRunning(s) {
				running++
			}
		}
		c.Held = running >= limit || slices.ContainsFunc(siblings, ChildWaiting)
	}
	if err := upsertJobTxn(txn, index, c); err != nil {
		return err
	}
	res.Created, res.Held = true, c.Held
	if c.Held {
		return nil
	}
	jobs := map[string]struct{}{}
	if err := upsertEvalsTxn(txn, index, []*structs.Evaluation{eval}, jobs); err != nil {
		return err
	}
	return updateJobStatusesTxn(txn, index, jobs, false)
}

// ReleaseHeldChildren releases, oldest first, as many of parentID's
// waiting children as its max_running_children leaves room for (all of
// them when the parent is gone or has no limit), each only if evals holds
// an evaluation for it, and upserts those evaluations. It returns the IDs
// released, in order; none is not an error.
func (s *StateStore) ReleaseHeldChildren(index uint64, parentID string, evals []*structs.Evaluation) ([]string, error) {
	byJob := make(map[string]*structs.Evaluation, len(evals))
	for _, e := range evals {
		if e == nil || e.ID == "" {
			return nil, invalid("children release: evaluation nil or without ID")
		}
		byJob[e.JobID] = e
	}
	txn := s.writeTxn()
	defer txn.Abort()
	parent, err := jobByIDTxn(txn, nil, parentID)
	if err != nil {
		return nil, err
	}
	children, err := childrenTxn(txn, nil, parentID)
	if err != nil {
		return nil, err
	}
	room := len(children)
	if parent != nil && parent.MaxRunningChildren > 0 {
		running := 0
		for _, c := range children {
			if ChildRunning(c) {
				running++
			}
		}
		room = parent.MaxRunningChildren - running
	}
	var released []string
	var toEval []*structs.Evaluation
	for _, c := range children {
		if room <= 0 {
			break
		}
		if !ChildWaiting(c) {
			continue
		}
		e, ok := byJob[c.ID]
		if !ok {
			break // keep the order: a later child never passes an older one
		}
		n, err := safeCopy("job", c.ID, c.Copy)
		if err != nil {
			return nil, err
		}
		n.Held = false
		n.ModifyIndex = index
		if err := txn.Insert(TableJobs, n); err != nil {
			return nil, fmt.Errorf("state: release job %q: %w", c.ID, err)
		}
		released = append(released, c.ID)
		toEval = append(toEval, e)
		room--
	}
	if len(released) == 0 {
		return nil, nil
	}
	if err := setIndex(txn, TableJobs, index); err != nil {
		return nil, err
	}
	jobs := map[string]struct{}{}
	if err := upsertEvalsTxn(txn, index, toEval, jobs); err != nil {
		return nil, err
	}
	if err := updateJobStatusesTxn(txn, index, jobs, false); err != nil {
		return nil, err
	}
	s.commitTxn(txn, index)
	return released, nil
}

// PeriodicLaunchRestore inserts a launch record from a snapshot.
func (r *StateRestore) PeriodicLaunchRestore(l *structs.PeriodicLaunch) error {
	if l == nil || l.ID == "" {
		return invalid("restore periodic launch: nil or without ID")
	}
	return r.insert(TablePeriodicLaunch, l.ID, l)
}
