package provision

import (
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// gc deletes the pool's finished requests older than GCAge, keeping the
// newest KeepPerPool finished ones (the decisions a status shows) and
// every completed create whose host lives (the pool's host records).
func (p *Provisioner) gc(pool string, reqs []*structs.ProvisionRequest, v *poolView, now time.Time) error {
	live := map[string]bool{}
	for _, r := range v.live {
		live[r.ID] = true
	}
	var finished []*structs.ProvisionRequest
	for _, r := range reqs {
		if r.Finished() && !live[r.ID] {
			finished = append(finished, r)
		}
	}
	if len(finished) <= p.cfg.KeepPerPool {
		return nil
	}
	sort.Slice(finished, func(i, j int) bool { return finished[i].ModifyIndex > finished[j].ModifyIndex })
	var ids []string
	for _, r := range finished[p.cfg.KeepPerPool:] {
		if now.UnixNano()-r.ModifyTime >= int64(p.cfg.GCAge) {
			ids = append(ids, r.ID)
		}
		if len(ids) == structs.MaxProvisionRequestsPerEntry {
			break
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, _, err := p.cfg.Apply(structs.ProvisionRequestDeleteRequestType, &structs.ProvisionRequestDeleteRequest{IDs: ids})
	if err == nil {
		p.logger.Debug("gc finished provision requests", "pool", pool, "count", len(ids))
	}
	return err
}
