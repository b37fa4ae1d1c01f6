package provision

import (
	"context"
	"fmt"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// hostGoneGrace is how long after a create completed a host missing from
// the provider's list is still taken as starting (a list that lags).
const hostGoneGrace = time.Minute

func (p *Provisioner) reconcileDue(pool string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.lastReconcile[pool]
	return !p.reconciling[pool] && (!ok || now.Sub(last) >= p.cfg.ReconcileInterval)
}

// reconcilePending reports whether the pool has not been reconciled once
// since this provisioner started (its first List still runs).
func (p *Provisioner) reconcilePending(pool string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reconciling[pool] && p.lastReconcile[pool].IsZero()
}

// startReconcile lists the pool's hosts in the background and matches
// them with the records (see reconcilePool).
func (p *Provisioner) startReconcile(ctx context.Context, pool *structs.NodePool) {
	p.mu.Lock()
	p.reconciling[pool.Name] = true
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		err := p.reconcilePool(ctx, pool)
		if err != nil && ctx.Err() == nil {
			p.logger.Warn("reconcile with provider failed; retried next interval", "pool", pool.Name, "error", err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.reconciling[pool.Name] = false
		// A failed first List does not hold the pool back for good: the
		// providers' idempotency keys still prevent a second host.
		if ctx.Err() == nil {
			p.lastReconcile[pool.Name] = p.cfg.Now()
		}
	}()
}

// reconcilePool lists the pool's hosts and matches them with the
// records, as a new leader must after a failover:
//   - a pending create whose host exists is completed with it (not made
//     again);
//   - a host that no live create names (unknown key, a canceled create,
//     a second host for one key, a host already terminated) is an orphan:
//     terminated, or adopted when the pool's Orphans policy says "adopt"
//     (never a second host for a key);
//   - a completed create whose host is gone from the list is recorded as
//     terminated, so the pool's size is true again.
//
// Every orphan is logged.
func (p *Provisioner) reconcilePool(ctx context.Context, pool *structs.NodePool) error {
	prov, err := p.cfg.Provider(pool)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	hosts, err := prov.List(lctx, pool.Name)
	cancel()
	p.cfg.Metrics.call(pool.Name, "list", err)
	if err != nil {
		return fmt.Errorf("%s list: %w", prov.Name(), err)
	}
	reqs, err := p.cfg.State().ProvisionRequestsByPool(nil, pool.Name)
	if err != nil {
		return err
	}
	v := newPoolView(pool, reqs)
	byKey := map[string]*structs.ProvisionRequest{}
	named := map[string]bool{} // host IDs a live create names
	for _, r := range reqs {
		if r.Op == structs.ProvisionOpCreate && r.IdempotencyKey != "" {
			byKey[r.IdempotencyKey] = r
		}
	}
	for _, r := range v.live {
		named[r.HostID] = true
	}
	now := p.cfg.Now()
	listed := map[string]bool{}
	for _, h := range hosts {
		if h.ID == "" {
			continue
		}
		listed[h.ID] = true
		if h.Pool != "" && h.Pool != pool.Name {
			continue
		}
		r := byKey[h.IdempotencyKey]
		switch {
		case named[h.ID]:
			continue // a live host, as recorded
		case r != nil && !r.Finished() && !p.isInFlight(r.ID) && !hostRunning(h):
			// Made but not started (its create was cut short): the
			// executor's Create, idempotent on the key, finishes it.
			continue
		case r != nil && !r.Finished() && !p.isInFlight(r.ID):
			ok, err := p.applyResult(&structs.ProvisionResultRequest{ID: r.ID, ExpectedIndex: r.ModifyIndex,
				Status: structs.ProvisionStatusComplete, HostID: h.ID, Attempts: r.Attempts, UpdatedAt: now.UnixNano()})
			if err != nil {
				return err
			}
			if ok {
				named[h.ID] = true
				p.logger.Info("reconcile: the host of a pending create exists; completed, not made again", "pool", pool.Name, "request_id", r.ID, "host_id", h.ID)
			}
			continue
		case r != nil && !r.Finished():
			continue // its call runs: its answer completes it
		}
		if _, busy := v.terminating[h.ID]; busy {
			continue
		}
		// Adopt only a host whose key no record holds: never a second
		// host for a key, nor one of a canceled create.
		if pool.Scaling.Orphans == structs.PoolOrphansAdopt && r == nil && h.IdempotencyKey != "" {
			id := structs.GenerateUUID()
			rec := &structs.ProvisionRequest{ID: id, Pool: pool.Name, Op: structs.ProvisionOpCreate, IdempotencyKey: h.IdempotencyKey,
				HostID: h.ID, NodeName: h.NodeName, Shape: pool.Scaling.Shape, Status: structs.ProvisionStatusComplete,
				Reason: reasonReconcilePrefix + "adopted orphan host " + h.ID, CreateTime: now.UnixNano(), ModifyTime: now.UnixNano()}
			if _, _, err := p.cfg.Apply(structs.ProvisionRequestUpsertRequestType, &structs.ProvisionRequestUpsertRequest{Requests: []*structs.ProvisionRequest{rec}}); err != nil {
				return err
			}
			byKey[h.IdempotencyKey] = rec
			named[h.ID] = true
			p.logger.Warn("reconcile: adopted orphan host", "pool", pool.Name, "host_id", h.ID, "key", h.IdempotencyKey, "node", h.NodeName)
			continue
		}
		p.logger.Warn("reconcile: orphan host; terminating", "pool", pool.Name, "host_id", h.ID, "key", h.IdempotencyKey, "node", h.NodeName)
		if err := p.recordTerminate(pool.Name, h.ID, h.NodeName, "", reasonReconcilePrefix+"orphan host "+h.ID+": terminate", now); err != nil {
			return err
		}
		v.terminating[h.ID] = &structs.ProvisionRequest{}
	}
	for _, r := range v.live {
		if listed[r.HostID] || now.UnixNano()-r.ModifyTime < int64(hostGoneGrace) {
			continue
		}
		if _, busy := v.terminating[r.HostID]; busy {
			continue
		}
		id := structs.GenerateUUID()
		gone := &structs.ProvisionRequest{ID: id, Pool: pool.Name, Op: structs.ProvisionOpTerminate, IdempotencyKey: id, HostID: r.HostID,
			NodeName: r.NodeName, Status: structs.ProvisionStatusComplete, Reason: reasonReconcilePrefix + "host " + r.HostID + " is gone from the provider",
			CreateTime: now.UnixNano(), ModifyTime: now.UnixNano()}
		if _, _, err := p.cfg.Apply(structs.ProvisionRequestUpsertRequestType, &structs.ProvisionRequestUpsertRequest{Requests: []*structs.ProvisionRequest{gone}}); err != nil {
			return err
		}
		p.logger.Warn("reconcile: a recorded host is gone from the provider", "pool", pool.Name, "host_id", r.HostID)
	}
	return nil
}

// hostRunning reports whether a listed host is up, or its provider does
// not say ("" state).
func hostRunning(h Host) bool {
	return h.State == "" || h.State == "running"
}
