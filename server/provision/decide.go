package provision

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// This file holds the pure part of scale-up: from a pool, its requests
// and the blocked evaluations (with their jobs), how many hosts to ask
// for and why. It reads no clock and does no I/O.

// poolView is what the decisions of one pool read: the pool's provision
// requests split by what they stand for.
type poolView struct {
	pool *structs.NodePool
	// live are completed creates whose host was not terminated since.
	live []*structs.ProvisionRequest
	// pending are creates not finished yet (pending or failed).
	pending []*structs.ProvisionRequest
	// terminating are terminates not finished yet, by HostID.
	terminating map[string]*structs.ProvisionRequest
	// groups are the requests of each gang set, by GroupKey.
	groups map[string][]*structs.ProvisionRequest
	// lastDecision is the newest CreateTime of the pool's requests
	// (Unix nanoseconds), for the cooldown.
	lastDecision int64
}

// newPoolView sorts a pool's requests into a poolView.
func newPoolView(pool *structs.NodePool, reqs []*structs.ProvisionRequest) *poolView {
	v := &poolView{pool: pool, terminating: map[string]*structs.ProvisionRequest{}, groups: map[string][]*structs.ProvisionRequest{}}
	terminated := map[string]bool{}
	for _, r := range reqs {
		if r.Op == structs.ProvisionOpTerminate && r.HostID != "" {
			switch {
			case r.Status == structs.ProvisionStatusComplete:
				terminated[r.HostID] = true
			case !r.Finished():
				v.terminating[r.HostID] = r
			}
		}
		if r.CreateTime > v.lastDecision && !strings.HasPrefix(r.Reason, reasonReconcilePrefix) {
			v.lastDecision = r.CreateTime
		}
	}
	for _, r := range reqs {
		if r.Op != structs.ProvisionOpCreate {
			continue
		}
		if r.GroupKey != "" {
			v.groups[r.GroupKey] = append(v.groups[r.GroupKey], r)
		}
		switch {
		case r.Status == structs.ProvisionStatusComplete && r.HostID != "" && !terminated[r.HostID]:
			v.live = append(v.live, r)
		case !r.Finished():
			v.pending = append(v.pending, r)
		}
	}
	return v
}

// hostNeed is what one blocked task group asks of the pool.
type hostNeed struct {
	// key groups equal needs in a reason: "nvidia/gpu x 1 of class a100".
	key   string
	hosts int
	// gang is set for a gang group: all hosts or none, under GroupKey.
	gang     bool
	groupKey string
}

// blockedDemand returns what the pool's blocked evaluations need, each
// task group whose needs the pool's shape fits. jobs maps "namespace/id"
// to the job. A group of a node_pool = "all" job counts only in the pool
// that owners names for it (anyPoolOwners), so two scaling pools do not
// both make hosts for it. Groups of a job of this very pool that the shape
// cannot place (too many GPUs, another class or GPU model) are skipped,
// since more hosts of this pool would not help, and each is named in
// unserved, with the job's namespace.
func blockedDemand(pool *structs.NodePool, evals []*structs.Evaluation, jobs map[string]*structs.Job, owners map[string]string) (needs []hostNeed, evalsByKey map[string]map[string]bool, unserved []structs.PoolWait) {
	shape := pool.Scaling.Shape
	evalsByKey = map[string]map[string]bool{}
	for _, e := range blockedInOrder(evals) {
		job := jobs[e.Namespace+"/"+e.JobID]
		if job == nil || job.Stop || !jobInPool(job, pool.Name) {
			continue
		}
		for _, name := range failedGroups(e) {
			m := e.FailedTGAllocs[name]
			tg := job.LookupTaskGroup(name)
			if m == nil || tg == nil {
				continue
			}
			if job.NodePool == structs.NodePoolAll && owners[ownerKey(e, name)] != pool.Name {
				continue
			}
			unplaced := 1 + m.CoalescedFailures - m.AwaitingStops
			if tg.Gang && tg.Count > unplaced {
				unplaced = tg.Count
			}
			if unplaced <= 0 {
				continue
			}
			key, perHost, why := fitShape(tg, shape)
			if why != "" {
				if job.NodePool != structs.NodePoolAll {
					unserved = append(unserved, structs.PoolWait{Namespace: job.Namespace,
						Reason: fmt.Sprintf("job %.80q group %.80q %s: no host of this pool can place it", job.ID, tg.Name, why)})
				}
				continue
			}
			n := hostNeed{key: key, hosts: (unplaced + perHost - 1) / perHost}
			if tg.Gang {
				n.gang = true
				n.groupKey = fmt.Sprintf("gang/%s/%s/%s/%d", job.Namespace, job.ID, tg.Name, job.JobModifyIndex)
			}
			needs = append(needs, n)
			if n.gang {
				continue // a gang's reason counts its own hosts
			}
			if evalsByKey[key] == nil {
				evalsByKey[key] = map[string]bool{}
			}
			evalsByKey[key][e.ID] = true
		}
	}
	return needs, evalsByKey, unserved
}

// blockedInOrder returns the blocked evaluations of evals, oldest
// (lowest CreateIndex) first.
func blockedInOrder(evals []*structs.Evaluation) []*structs.Evaluation {
	var out []*structs.Evaluation
	for _, e := range evals {
		if e != nil && e.Status == structs.EvalStatusBlocked {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreateIndex < out[j].CreateIndex })
	return out
}

// failedGroups returns the names of the task groups e failed to place,
// sorted.
func failedGroups(e *structs.Evaluation) []string {
	names := make([]string, 0, len(e.FailedTGAllocs))
	for name := range e.FailedTGAllocs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ownerKey names one failed task group of one evaluation.
func ownerKey(e *structs.Evaluation, group string) string { return e.ID + "\x00" + group }

// anyPoolOwners returns, for each failed task group of a blocked
// node_pool = "all" job, the scaling pool that alone may make hosts for
// it: the first by name whose shape fits the group. Groups no pool fits
// are left out.
func anyPoolOwners(pools []*structs.NodePool, evals []*structs.Evaluation, jobs map[string]*structs.Job) map[string]string {
	sorted := make([]*structs.NodePool, 0, len(pools))
	for _, p := range pools {
		if p != nil && p.Scaling != nil {
			sorted = append(sorted, p)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	out := map[string]string{}
	for _, e := range blockedInOrder(evals) {
		job := jobs[e.Namespace+"/"+e.JobID]
		if job == nil || job.Stop || job.NodePool != structs.NodePoolAll {
			continue
		}
		for _, name := range failedGroups(e) {
			tg := job.LookupTaskGroup(name)
			if tg == nil {
				continue
			}
			for _, p := range sorted {
				if _, _, why := fitShape(tg, p.Scaling.Shape); why == "" {
					out[ownerKey(e, name)] = p.Name
					break
				}
			}
		}
	}
	return out
}

// jobInPool reports whether the job's allocations may go to pool.
func jobInPool(job *structs.Job, pool string) bool {
	jp := job.NodePool
	if jp == "" {
		jp = structs.NodePoolDefault
	}
	return jp == pool || jp == structs.NodePoolAll
}

// fitShape says whether one allocation of tg fits a host of shape: why
// is empty when it does, else what does not fit ("asks 12 GPUs an
// allocation, a host of this pool has 8"). When it fits, perHost is how
// many fit on one host (by GPUs; one when the group asks for none) and key
// names the need in reasons.
func fitShape(tg *structs.TaskGroup, shape structs.NodeShape) (key string, perHost int, why string) {
	var devName string
	gpus := 0
	for _, t := range tg.Tasks {
		if t == nil || t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if d == nil || !isGPUDevice(d.Name) {
				continue
			}
			if !gpuModelMatches(d.Name, shape.GPUModel) {
				return "", 0, fmt.Sprintf("asks device %.60q, a host of this pool has GPU model %.60q", d.Name, shape.GPUModel)
			}
			if devName == "" {
				devName = d.Name
			}
			gpus += max(d.Count, 1)
		}
	}
	class := groupClass(tg)
	if class != "" && class != shape.NodeClass {
		return "", 0, fmt.Sprintf("is pinned to node class %.60q, a host of this pool has class %.60q", class, shape.NodeClass)
	}
	perHost = 1
	if gpus > 0 {
		if gpus > shape.GPUCount {
			return "", 0, fmt.Sprintf("asks %d GPUs an allocation, a host of this pool has %d", gpus, shape.GPUCount)
		}
		perHost = shape.GPUCount / gpus
		key = fmt.Sprintf("%s x %d", devName, gpus)
	} else {
		key = "1 host each"
	}
	if class != "" {
		key += " of class " + class
	}
	return key, perHost, ""
}

// isGPUDevice reports whether a requested device name ("gpu",
// "nvidia/gpu", "nvidia/gpu/H100") asks for a GPU.
func isGPUDevice(name string) bool {
	parts := strings.Split(name, "/")
	switch len(parts) {
	case 1:
		return parts[0] == "gpu"
	case 2, 3:
		return parts[1] == "gpu"
	}
	return false
}

// gpuModelMatches reports whether a device name's model part (the third
// of "vendor/gpu/model") matches the shape's GPU model; a name without a
// model matches any.
func gpuModelMatches(name, model string) bool {
	parts := strings.Split(name, "/")
	if len(parts) < 3 {
		return true
	}
	return model != "" && strings.Contains(strings.ToLower(model), strings.ToLower(parts[2]))
}

// groupClass returns the node class a group's (or its tasks')
// constraints pin with "${node.class} = X", or "".
func groupClass(tg *structs.TaskGroup) string {
	cons := append([]*structs.Constraint(nil), tg.Constraints...)
	for _, t := range tg.Tasks {
		if t != nil {
			cons = append(cons, t.Constraints...)
		}
	}
	for _, c := range cons {
		if c != nil && c.LTarget == "${node.class}" && (c.Operand == "=" || c.Operand == "==" || c.Operand == "") {
			return c.RTarget
		}
	}
	return ""
}

// scaleUp is one decision: count hosts, one gang set when groupKey is set.
type scaleUp struct {
	count    int
	groupKey string
	reason   string
}

// decideScaleUp returns the pool's scale-up decisions (planScaleUp),
// or none within Cooldown of the pool's last decision (now and times in
// Unix nanoseconds).
func decideScaleUp(v *poolView, needs []hostNeed, evalsByKey map[string]map[string]bool, notReady int, now int64) []scaleUp {
	sp := v.pool.Scaling
	if sp == nil {
		return nil
	}
	if v.lastDecision != 0 && now-v.lastDecision < int64(sp.Cooldown) {
		return nil
	}
	out, _ := planScaleUp(v, needs, evalsByKey, notReady)
	return out
}

// planScaleUp returns what scale-up would decide now: enough hosts for
// the blocked needs, minus the hosts already coming (pending creates and
// created hosts whose node is not ready yet: notReady), within Max, and a
// top-up to Min. A gang gets its whole set or nothing, and never a second
// set while one with its GroupKey exists. held names each need Max leaves
// unserved (a gang larger than the room left, demand at max), for the
// pool's status.
func planScaleUp(v *poolView, needs []hostNeed, evalsByKey map[string]map[string]bool, notReady int) (out []scaleUp, held []string) {
	sp := v.pool.Scaling
	if sp == nil {
		return nil, nil
	}
	current := len(v.live) + len(v.pending)
	room := sp.Max - current
	// Gangs first, oldest first: each whole or not at all.
	for _, n := range needs {
		if !n.gang {
			continue
		}
		if _, exists := v.groups[n.groupKey]; exists {
			continue
		}
		if n.hosts > room {
			held = append(held, fmt.Sprintf("gang of %d needs %s all at once: max %d leaves room for %d", n.hosts, n.key, sp.Max, max(room, 0)))
			continue
		}
		room -= n.hosts
		out = append(out, scaleUp{count: n.hosts, groupKey: n.groupKey,
			reason: fmt.Sprintf("gang of %d needs %s: +%d (all or none)", n.hosts, n.key, n.hosts)})
	}
	// Other groups: summed per key, minus what is already coming.
	coming := notReady
	for _, r := range v.pending {
		if r.GroupKey == "" {
			coming++
		}
	}
	perKey := map[string]int{}
	var keys []string
	for _, n := range needs {
		if n.gang {
			continue
		}
		if _, ok := perKey[n.key]; !ok {
			keys = append(keys, n.key)
		}
		perKey[n.key] += n.hosts
	}
	for _, k := range keys {
		want := perKey[k]
		take := min(want, coming)
		coming -= take
		want -= take
		if want <= 0 {
			continue
		}
		nEvals := len(evalsByKey[k])
		word := "evals need"
		if nEvals == 1 {
			word = "eval needs"
		}
		capped := ""
		if want > room {
			held = append(held, fmt.Sprintf("%d blocked %s %s: %d more hosts than max %d allows", nEvals, word, k, want-max(room, 0), sp.Max))
			want = room
			capped = fmt.Sprintf(" (capped at max %d)", sp.Max)
		}
		if want <= 0 {
			continue
		}
		room -= want
		out = append(out, scaleUp{count: want, reason: fmt.Sprintf("%d blocked %s %s: +%d%s", nEvals, word, k, want, capped)})
	}
	// Top-up to Min.
	total := current
	for _, d := range out {
		total += d.count
	}
	if total < sp.Min {
		out = append(out, scaleUp{count: sp.Min - total, reason: fmt.Sprintf("pool below min %d: +%d", sp.Min, sp.Min-total)})
	}
	return out, held
}
