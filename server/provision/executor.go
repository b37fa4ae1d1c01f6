package provision

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// dispatch starts a provider call, each in its own goroutine, for every
// request of the pool that is due (pending, or failed with NextAttempt
// passed) and has no call running, at most MaxInFlight per pool. Nothing
// here holds a lock while a provider runs.
func (p *Provisioner) dispatch(ctx context.Context, pool *structs.NodePool, reqs []*structs.ProvisionRequest, now time.Time) {
	for _, r := range reqs {
		if r.Finished() || (r.Status == structs.ProvisionStatusFailed && r.NextAttempt > now.UnixNano()) {
			continue
		}
		p.mu.Lock()
		if p.inFlight[r.ID] || p.poolInFlight[pool.Name] >= p.cfg.MaxInFlight {
			p.mu.Unlock()
			continue
		}
		p.inFlight[r.ID] = true
		p.poolInFlight[pool.Name]++
		p.mu.Unlock()
		p.wg.Add(1)
		go func(r *structs.ProvisionRequest) {
			defer p.wg.Done()
			defer func() {
				p.mu.Lock()
				delete(p.inFlight, r.ID)
				p.poolInFlight[pool.Name]--
				p.mu.Unlock()
			}()
			p.execute(ctx, pool, r)
		}(r.Copy())
	}
}

// execute makes the provider call of one request, with its deadline, and
// applies the answer only if the request is still at the ModifyIndex read
// before the call (the FSM's compare-and-set).
func (p *Provisioner) execute(ctx context.Context, pool *structs.NodePool, r *structs.ProvisionRequest) {
	prov, err := p.cfg.Provider(pool)
	var host Host
	join := p.cfg.Join()
	if err == nil {
		switch r.Op {
		case structs.ProvisionOpCreate:
			cctx, cancel := context.WithTimeout(ctx, p.cfg.CreateTimeout)
			host, err = prov.Create(cctx, CreateRequest{
				Pool: pool.Name, IdempotencyKey: r.IdempotencyKey, NodeName: r.NodeName, Shape: r.Shape,
				Config: pool.Scaling.ProviderConfig, Join: join,
			})
			cancel()
			if err == nil && host.ID == "" {
				err = errors.New("provider returned a host without an ID")
			}
		case structs.ProvisionOpTerminate:
			cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
			err = prov.Terminate(cctx, pool.Name, r.HostID)
			cancel()
			if errors.Is(err, ErrHostNotFound) {
				err = nil
			}
		default:
			err = fmt.Errorf("unknown op %q", r.Op)
		}
	}
	// A provider's error may quote what it was given (an exec script's
	// stderr echoing its stdin): the join token never reaches the
	// request's Error (Raft, status) or the log.
	err = redactToken(err, join.Token)
	p.cfg.Metrics.call(pool.Name, r.Op, err)
	if ctx.Err() != nil {
		// Leadership lost mid-call: the next leader reconciles (a host
		// this call made is found by List and completes the request).
		return
	}
	now := p.cfg.Now()
	res := &structs.ProvisionResultRequest{ID: r.ID, ExpectedIndex: r.ModifyIndex, Attempts: r.Attempts + 1, UpdatedAt: now.UnixNano()}
	switch {
	case err == nil:
		res.Status = structs.ProvisionStatusComplete
		res.HostID = host.ID
	case res.Attempts >= p.cfg.MaxAttempts:
		res.Status = structs.ProvisionStatusCanceled
		res.Error = structs.TruncateProvisionError(fmt.Sprintf("gave up after %d attempts: %s %s: %v", res.Attempts, providerName(prov), r.Op, err))
	default:
		res.Status = structs.ProvisionStatusFailed
		res.Error = structs.TruncateProvisionError(fmt.Sprintf("%s %s: %v", providerName(prov), r.Op, err))
		res.NextAttempt = now.Add(p.backoff(r.ID, res.Attempts)).UnixNano()
	}
	if err != nil {
		p.logger.Warn("provider call failed", "pool", pool.Name, "op", r.Op, "request_id", r.ID, "attempt", res.Attempts, "error", err)
	}
	applied, aerr := p.applyResult(res)
	if aerr != nil {
		p.logger.Warn("record provider answer", "pool", pool.Name, "request_id", r.ID, "error", aerr)
	}
	if applied && err == nil && r.Op == structs.ProvisionOpTerminate {
		p.deregisterNode(ctx, pool.Name, r.NodeName)
	}
	if applied || aerr != nil || err != nil || r.Op != structs.ProvisionOpCreate {
		return
	}
	// A stale create answer: if the request no longer names this host
	// (canceled, gone, or completed with another), the host is nobody's.
	cur, rerr := p.cfg.State().ProvisionRequestByID(nil, r.ID)
	if rerr != nil || (cur != nil && cur.HostID == host.ID) {
		return
	}
	p.logger.Warn("stale create answer left a host no request names; terminating it", "pool", pool.Name, "host_id", host.ID)
	if terr := p.recordTerminate(pool.Name, host.ID, r.NodeName, "", reasonReconcilePrefix+"host "+host.ID+" of a superseded create: terminate", now); terr != nil {
		p.logger.Warn("record terminate of superseded host", "host_id", host.ID, "error", terr)
	}
}

// deregisterNode removes the node named nodeName of pool, whose host is
// gone, through Config.Deregister. Failures are logged: the node then goes
// down by heartbeat as it would without this.
func (p *Provisioner) deregisterNode(ctx context.Context, pool, nodeName string) {
	if p.cfg.Deregister == nil || nodeName == "" {
		return
	}
	nodes, err := poolNodes(p.cfg.State(), pool)
	if err != nil {
		p.logger.Warn("read nodes of terminated host", "pool", pool, "node", nodeName, "error", err)
		return
	}
	n := nodes[nodeName]
	if n == nil {
		return // never joined, or already gone
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	if err := p.cfg.Deregister(dctx, n.ID); err != nil {
		p.logger.Warn("deregister node of terminated host", "pool", pool, "node_id", n.ID, "node", nodeName, "error", err)
		return
	}
	p.mu.Lock()
	delete(p.idle, n.ID)
	p.mu.Unlock()
	p.logger.Info("deregistered node of terminated host", "pool", pool, "node_id", n.ID, "node", nodeName)
}

// redactedToken replaces the join token in provider errors.
const redactedToken = "<join token redacted>"

func redactToken(err error, token string) error {
	if err == nil || token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, redactedToken))
}

func providerName(p Provider) string {
	if p == nil {
		return "provider"
	}
	return p.Name()
}

// backoff returns the delay before attempt n+1: BackoffBase * 2^(n-1),
// at most BackoffMax, plus a jitter of up to a quarter of it derived from
// the request ID (the same on every server).
func (p *Provisioner) backoff(id string, n int) time.Duration {
	d := p.cfg.BackoffBase
	for i := 1; i < n && d < p.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, p.cfg.BackoffMax)
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{byte(n)})
	return d + time.Duration(uint64(h.Sum32())%uint64(d/4+1))
}
