package client

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// This file is the client's endpoint manager (issue 14): per (namespace,
// job, group) with an endpoint block whose allocations run on this node,
// one router (agent/client/endpoint) listens on the endpoint's port and is
// fed the running members. It reads only this client's alloc runners and
// check runners, never the servers, so serving goes on while they are
// unreachable; member statuses travel to the servers with the allocation
// updates (allocRunner.changed) whenever a server takes them.

// Timings of the endpoint manager.
const (
	// endpointReconcileInterval is how often members are fed to their
	// routers (and at once after an allocation change).
	endpointReconcileInterval = 250 * time.Millisecond
	// endpointRetryDelay is how long a router that could not start
	// (its port taken) waits before it tries again.
	endpointRetryDelay = 2 * time.Second
	// memberGoneTimeout bounds the wait for the proof that a stopped
	// member's processes are gone (allocRunner.proveTasksGone).
	memberGoneTimeout = 15 * time.Second
)

// Reasons the manager gives for a member it does not hand to the router.
const (
	reasonTasksNotRunning = "tasks are not running"
	reasonStopping        = "stopping"
	reasonStopped         = "stopped: every member process is gone"
)

// routerMember is a member handed to a router (endpoint.Member).
type routerMember struct {
	AllocID       string
	Index         int
	Addr          string
	Identity      structs.EndpointIdentity
	ChecksPassing bool
}

// routerConfig is what the manager gives a new router.
type routerConfig struct {
	Endpoint   *structs.Endpoint
	ListenAddr string
	Logger     hclog.Logger
	// OnStatus is called with a member's status whenever the router
	// changes it.
	OnStatus func(allocID string, st structs.EndpointMemberStatus)
}

// endpointRouter is what the manager needs of a router
// (*endpoint.Router behind endpoint_router.go's adapter).
type endpointRouter interface {
	Start(ctx context.Context) error
	SetMembers(ms []routerMember)
	// Status fills the router's part of a ClientEndpointStatus.
	Status() *structs.ClientEndpointStatus
	Addr() string
	// Unlisten frees the router's port at once; Close drains the rest.
	Unlisten() error
	Close() error
}

// endpointKey names one endpoint on this node.
type endpointKey struct {
	Namespace, JobID, Group string
}

// endpointRun is one router the manager runs.
type endpointRun struct {
	key    endpointKey
	ep     structs.Endpoint
	router endpointRouter
	// members are the allocations last handed to the router; the
	// router's statuses of others are dropped.
	members map[string]bool
}

// endpointManager runs the routers of this node's endpoints.
type endpointManager struct {
	c         *Client
	logger    hclog.Logger
	newRouter func(routerConfig) (endpointRouter, error)
	digests   fileDigestCache
	kick      chan struct{}

	// reconcileMu lets one reconcile run at a time.
	reconcileMu sync.Mutex
	// closing counts the routers being closed (a close drains their
	// requests in flight, so it runs beside the reconciles).
	closing sync.WaitGroup

	mu      sync.Mutex
	routers map[endpointKey]*endpointRun
	// failed holds the routers that could not start: why, and when to
	// try again.
	failed map[endpointKey]endpointFailure
}

type endpointFailure struct {
	err     string
	retryAt time.Time
}

func newEndpointManager(c *Client, newRouter func(routerConfig) (endpointRouter, error)) *endpointManager {
	return &endpointManager{c: c, logger: c.logger.Named("endpoints"), newRouter: newRouter, kick: make(chan struct{}, 1),
		routers: map[endpointKey]*endpointRun{}, failed: map[endpointKey]endpointFailure{}}
}

// wake asks for a reconcile soon.
func (m *endpointManager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// run reconciles until ctx ends, then closes every router.
func (m *endpointManager) run(ctx context.Context) {
	t := time.NewTicker(endpointReconcileInterval)
	defer t.Stop()
	for {
		m.reconcile(ctx)
		select {
		case <-ctx.Done():
			m.closeAll()
			return
		case <-t.C:
		case <-m.kick:
		}
	}
}

// closeAll stops every router.
func (m *endpointManager) closeAll() {
	m.reconcileMu.Lock()
	defer m.reconcileMu.Unlock()
	m.mu.Lock()
	runs := m.routers
	m.routers = map[endpointKey]*endpointRun{}
	m.mu.Unlock()
	for _, run := range runs {
		m.closeRun(run)
	}
	m.closing.Wait()
}

// closeRun closes a router in the background: Close lets the requests in
// flight finish (up to the router's drain timeout) while the manager goes
// on; closeAll waits for it.
func (m *endpointManager) closeRun(run *endpointRun) {
	m.closing.Add(1)
	go func() {
		defer m.closing.Done()
		if err := run.router.Close(); err != nil {
			m.logger.Warn("close endpoint router", "endpoint", run.ep.Name, "error", err)
		}
		m.logger.Info("endpoint router stopped", "endpoint", run.ep.Name, "job", run.key.JobID, "group", run.key.Group)
	}()
}

// endpointMembership is one allocation runner of an endpoint group.
type endpointMembership struct {
	ar *allocRunner
	tg *structs.TaskGroup
}

// reconcile starts the routers of endpoints with members, feeds each its
// running members, and stops those left without any.
func (m *endpointManager) reconcile(ctx context.Context) {
	m.reconcileMu.Lock()
	defer m.reconcileMu.Unlock()
	if ctx.Err() != nil {
		// The client is shutting down: closeAll stopped (or stops) every
		// router, and none starts again.
		return
	}
	groups := map[endpointKey][]endpointMembership{}
	// The runners are read under the client's lock, their state under
	// each one's own afterwards: an alloc runner takes the client's lock
	// while holding its own (newServiceRunner reads the node).
	m.c.mu.Lock()
	runners := make([]*allocRunner, 0, len(m.c.runners))
	for _, ar := range m.c.runners {
		runners = append(runners, ar)
	}
	m.c.mu.Unlock()
	for _, ar := range runners {
		a := ar.alloc
		if a.Job == nil {
			continue
		}
		tg := a.Job.LookupTaskGroup(a.TaskGroup)
		if tg == nil || tg.Endpoint == nil {
			continue
		}
		if !ar.endpointActive() {
			continue
		}
		k := endpointKey{Namespace: a.Namespace, JobID: a.JobID, Group: a.TaskGroup}
		groups[k] = append(groups[k], endpointMembership{ar: ar, tg: tg})
	}

	m.mu.Lock()
	var stale []*endpointRun
	for k, run := range m.routers {
		if _, ok := groups[k]; !ok {
			stale = append(stale, run)
			delete(m.routers, k)
		}
	}
	for k := range m.failed {
		if _, ok := groups[k]; !ok {
			delete(m.failed, k)
		}
	}
	m.mu.Unlock()
	for _, run := range stale {
		m.closeRun(run)
	}
	for k, ms := range groups {
		m.reconcileEndpoint(ctx, k, ms)
	}
}

// reconcileEndpoint feeds one endpoint's router, starting (or, after a
// new job version changed the endpoint block, restarting) it as needed.
func (m *endpointManager) reconcileEndpoint(ctx context.Context, k endpointKey, ms []endpointMembership) {
	sort.Slice(ms, func(i, j int) bool {
		ai, aj := ms[i].ar.alloc, ms[j].ar.alloc
		if ai.Index() != aj.Index() {
			return ai.Index() < aj.Index()
		}
		return ai.ID < aj.ID
	})
	// The endpoint block of the newest job version among the members,
	// and the router address its plan gave (the node's address when the
	// allocation names none).
	ep, newest, listenIP := ms[0].tg.Endpoint, uint64(0), m.c.cfg.networkAddress()
	for _, mb := range ms {
		if v := mb.ar.alloc.Job.Version; v >= newest {
			ep, newest = mb.tg.Endpoint, v
			if ar := mb.ar.alloc.AllocatedResources; ar != nil && ar.Shared != nil && ar.Shared.Endpoint != nil && ar.Shared.Endpoint.HostIP != "" {
				listenIP = ar.Shared.Endpoint.HostIP
			}
		}
	}
	run, err := m.routerFor(ctx, k, ep, listenIP)
	if err != nil {
		for _, mb := range ms {
			mb.ar.setEndpointStatus(structs.EndpointMemberStatus{Reason: err.Error()})
		}
		return
	}
	hostIP := m.c.cfg.networkAddress()
	var members []routerMember
	in := map[string]bool{}
	for _, mb := range ms {
		ar, a := mb.ar, mb.ar.alloc
		if !ar.tasksRunning() {
			ar.setEndpointStatus(structs.EndpointMemberStatus{Reason: reasonTasksNotRunning})
			continue
		}
		addr, err := memberAddr(a, mb.tg, ep, hostIP)
		if err != nil {
			ar.setEndpointStatus(structs.EndpointMemberStatus{Reason: err.Error()})
			continue
		}
		id, err := ar.endpointIdentity(mb.tg, &m.digests)
		if err != nil {
			ar.setEndpointStatus(structs.EndpointMemberStatus{Reason: err.Error(), Identity: id})
			continue
		}
		in[a.ID] = true
		members = append(members, routerMember{AllocID: a.ID, Index: a.Index(), Addr: addr, Identity: id, ChecksPassing: ar.checksPassing()})
	}
	m.mu.Lock()
	run.members = in
	m.mu.Unlock()
	run.router.SetMembers(members)
}

// routerFor returns the router of k serving endpoint block ep, starting
// it, or replacing the one started for an earlier block (a new job
// version changed it).
func (m *endpointManager) routerFor(ctx context.Context, k endpointKey, ep *structs.Endpoint, listenIP string) (*endpointRun, error) {
	m.mu.Lock()
	run := m.routers[k]
	var replaced *endpointRun
	if run != nil && run.ep != *ep {
		replaced, run = run, nil
		delete(m.routers, k)
	}
	m.mu.Unlock()
	if replaced != nil {
		// The port is given up now, so the new router binds it at once;
		// the old one drains its requests in flight in the background.
		if err := replaced.router.Unlisten(); err != nil {
			m.logger.Warn("close the listener of a replaced endpoint router", "endpoint", replaced.ep.Name, "error", err)
		}
		m.closeRun(replaced)
	}
	if run != nil {
		return run, nil
	}
	return m.startRouter(ctx, k, ep, listenIP)
}

// startRouter creates and starts the router of k on listenIP and the
// endpoint's port. A failure is kept (and
// returned again without a new try) until endpointRetryDelay passes.
func (m *endpointManager) startRouter(ctx context.Context, k endpointKey, ep *structs.Endpoint, listenIP string) (*endpointRun, error) {
	m.mu.Lock()
	if f, ok := m.failed[k]; ok && time.Now().Before(f.retryAt) {
		m.mu.Unlock()
		return nil, fmt.Errorf("%s", f.err)
	}
	m.mu.Unlock()
	listen := net.JoinHostPort(listenIP, strconv.Itoa(ep.Port))
	run := &endpointRun{key: k, ep: *ep, members: map[string]bool{}}
	cfg := routerConfig{Endpoint: ep, ListenAddr: listen, Logger: m.logger.With("endpoint", ep.Name),
		OnStatus: func(allocID string, st structs.EndpointMemberStatus) { m.onStatus(run, allocID, st) }}
	r, err := m.newRouter(cfg)
	if err == nil {
		if err = r.Start(ctx); err != nil {
			_ = r.Close()
		}
	}
	if err != nil {
		err = fmt.Errorf("endpoint router cannot serve %s: %v", listen, err)
		m.logger.Warn("endpoint router did not start; will retry", "endpoint", ep.Name, "error", err, "retry_in", endpointRetryDelay)
		m.mu.Lock()
		m.failed[k] = endpointFailure{err: err.Error(), retryAt: time.Now().Add(endpointRetryDelay)}
		m.mu.Unlock()
		return nil, err
	}
	run.router = r
	m.mu.Lock()
	delete(m.failed, k)
	m.routers[k] = run
	m.mu.Unlock()
	m.logger.Info("endpoint router serving", "endpoint", ep.Name, "addr", r.Addr(), "job", k.JobID, "group", k.Group)
	return run, nil
}

// onStatus records a router's status of a member it was last handed.
func (m *endpointManager) onStatus(run *endpointRun, allocID string, st structs.EndpointMemberStatus) {
	m.mu.Lock()
	in := run.members[allocID] && m.routers[run.key] == run
	m.mu.Unlock()
	if !in {
		return
	}
	m.c.mu.Lock()
	ar := m.c.runners[allocID]
	m.c.mu.Unlock()
	if ar != nil {
		ar.setEndpointStatus(st)
	}
}

// leave takes ar out of its endpoint's rotation at once (its tasks are
// about to be killed), before the next periodic reconcile.
func (m *endpointManager) leave(ar *allocRunner) {
	if m == nil {
		return
	}
	ar.setEndpointStatus(structs.EndpointMemberStatus{Reason: reasonStopping})
	m.reconcile(m.c.ctx) // a no-op once the client shuts down
}

// statuses returns every router's status with, per member task, its
// process as the OS reports it now.
func (m *endpointManager) statuses() []*structs.ClientEndpointStatus {
	m.mu.Lock()
	runs := make([]*endpointRun, 0, len(m.routers))
	for _, r := range m.routers {
		runs = append(runs, r)
	}
	failed := make(map[endpointKey]string, len(m.failed))
	for k, f := range m.failed {
		failed[k] = f.err
	}
	m.mu.Unlock()
	out := make([]*structs.ClientEndpointStatus, 0, len(runs)+len(failed))
	for _, run := range runs {
		st := run.router.Status()
		if st == nil {
			st = &structs.ClientEndpointStatus{}
		}
		st.Namespace, st.JobID, st.TaskGroup = run.key.Namespace, run.key.JobID, run.key.Group
		for _, mb := range st.Members {
			mb.Processes = m.memberProcesses(mb.AllocID)
		}
		out = append(out, st)
	}
	for k, err := range failed {
		out = append(out, &structs.ClientEndpointStatus{Namespace: k.Namespace, JobID: k.JobID, TaskGroup: k.Group, Error: err})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.JobID != b.JobID {
			return a.JobID < b.JobID
		}
		return a.TaskGroup < b.TaskGroup
	})
	return out
}

// memberProcesses reads each task's process of the allocation from the OS.
func (m *endpointManager) memberProcesses(allocID string) []*structs.EndpointMemberProcess {
	m.c.mu.Lock()
	ar := m.c.runners[allocID]
	m.c.mu.Unlock()
	if ar == nil {
		return nil
	}
	ar.mu.Lock()
	names := make([]string, 0, len(ar.tasks))
	for n := range ar.tasks {
		names = append(names, n)
	}
	trs := make(map[string]*taskRunner, len(ar.tasks))
	for n, tr := range ar.tasks {
		trs[n] = tr
	}
	ar.mu.Unlock()
	sort.Strings(names)
	var out []*structs.EndpointMemberProcess
	for _, n := range names {
		tr := trs[n]
		p := &structs.EndpointMemberProcess{Task: n, Driver: tr.task.Driver}
		out = append(out, p)
		if tr.drv == nil {
			p.Error = "driver not available"
			continue
		}
		st, err := tr.drv.InspectTask(tr.taskID())
		if err != nil {
			p.Error = err.Error()
			continue
		}
		p.PID = st.PID
		if st.State != driver.TaskStateRunning || st.PID <= 0 {
			continue
		}
		alive, rss, err := readProcess(st.PID)
		p.Alive, p.RSSMiB = alive, rss
		if err != nil {
			p.Error = err.Error()
		}
	}
	return out
}

// memberAddr is the host:port a member serves on: the allocation's port
// for the endpoint's MemberPort label, or for the group's only port label
// when MemberPort is empty, on the port's host IP or hostIP.
func memberAddr(a *structs.Allocation, tg *structs.TaskGroup, ep *structs.Endpoint, hostIP string) (string, error) {
	label := ep.MemberPort
	if label == "" {
		var labels []string
		for _, nw := range tg.Networks {
			if nw == nil {
				continue
			}
			for _, p := range nw.ReservedPorts {
				labels = append(labels, p.Label)
			}
			for _, p := range nw.DynamicPorts {
				labels = append(labels, p.Label)
			}
		}
		if len(labels) != 1 {
			return "", fmt.Errorf("the group has %d port labels: name the members' one with member_port", len(labels))
		}
		label = labels[0]
	}
	var shared *structs.AllocatedSharedResources
	if a.AllocatedResources != nil {
		shared = a.AllocatedResources.Shared
	}
	pm, ok := shared.Port(label)
	if !ok || pm.Value <= 0 {
		return "", fmt.Errorf("the allocation has no port %q", label)
	}
	ip := pm.HostIP
	if ip == "" {
		ip = hostIP
	}
	return net.JoinHostPort(ip, strconv.Itoa(pm.Value)), nil
}

// endpointActive reports whether the runner's allocation is an endpoint
// member: not told to stop and not finished.
func (ar *allocRunner) endpointActive() bool {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.stopRequested {
		return false
	}
	select {
	case <-ar.done:
		return false
	default:
		return true
	}
}

// tasksRunning reports whether every task of the allocation runs.
func (ar *allocRunner) tasksRunning() bool {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if len(ar.taskStates) == 0 {
		return false
	}
	for _, ts := range ar.taskStates {
		if ts.State != structs.TaskStateRunning {
			return false
		}
	}
	return true
}

// checksPassing is the member's check verdict for the router: every
// service check passed its latest run; a group without checks passes
// while its tasks run (the router's live verification still applies).
func (ar *allocRunner) checksPassing() bool {
	ar.mu.Lock()
	sr := ar.services
	ar.mu.Unlock()
	if sr == nil {
		return true
	}
	passing, has := sr.passing()
	return passing || !has
}

// endpointIdentity returns the member's identity, computed once per start
// of its tasks (a restart computes it again: the binary may have changed).
// A failure is not kept: it is asked again at the next reconcile. After a
// client restart the restored task states say running before the driver
// has reattached the task, and the identity asked in that window fails;
// kept, it stood until the task's next start, which a reattached member
// never has, so the member was never admitted again. (A binary that
// cannot be hashed is asked again each time too; its file digest is not
// cached either, and the usual failures, not running, not a regular file,
// too large, cost no read.)
func (ar *allocRunner) endpointIdentity(tg *structs.TaskGroup, digests *fileDigestCache) (structs.EndpointIdentity, error) {
	var started int64
	ar.mu.Lock()
	for _, ts := range ar.taskStates {
		started += ts.StartedAt + int64(ts.Restarts)
	}
	if ar.epIdentity != nil && ar.epIdentityErr == nil && ar.epIdentityStart == started {
		id := *ar.epIdentity
		ar.mu.Unlock()
		return id, nil
	}
	ar.mu.Unlock()
	id, _, err := ar.identityOf(tg, digests)
	ar.mu.Lock()
	ar.epIdentity, ar.epIdentityErr, ar.epIdentityStart = &id, err, started
	ar.mu.Unlock()
	return id, err
}

// setEndpointStatus records the member's endpoint status and reports it
// with the allocation when it changed (admission, reason or identity).
func (ar *allocRunner) setEndpointStatus(st structs.EndpointMemberStatus) {
	st.Reason = clipReason(st.Reason)
	ar.mu.Lock()
	if st.Identity == (structs.EndpointIdentity{}) && ar.epIdentity != nil && ar.epIdentityErr == nil {
		st.Identity = *ar.epIdentity
	}
	if old := ar.endpointMember; old != nil && old.Admitted == st.Admitted && old.Reason == st.Reason && old.Identity == st.Identity {
		ar.mu.Unlock()
		return
	}
	if st.UpdatedAt <= 0 {
		st.UpdatedAt = time.Now().UnixNano()
	}
	ar.endpointMember = &st
	ar.mu.Unlock()
	ar.logger.Debug("endpoint member status", "admitted", st.Admitted, "reason", st.Reason)
	ar.changed()
}

// clipReason cuts a reason to structs.MaxEndpointReasonBytes on a rune
// boundary, replacing invalid UTF-8, so the servers take it.
func clipReason(s string) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s))
	}
	if len(s) <= structs.MaxEndpointReasonBytes {
		return s
	}
	cut := structs.MaxEndpointReasonBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Endpoints returns the status of every endpoint router this client runs
// (GET /v1/client/endpoints): the router's counters and members and, per
// member task, its process as the OS reports it now (pid, alive, RSS).
func (c *Client) Endpoints() []*structs.ClientEndpointStatus {
	if c.endpoints == nil {
		return nil
	}
	return c.endpoints.statuses()
}

// isEndpointMember reports whether the allocation's group has an endpoint.
func (ar *allocRunner) isEndpointMember() bool {
	if ar.alloc.Job == nil {
		return false
	}
	tg := ar.alloc.Job.LookupTaskGroup(ar.alloc.TaskGroup)
	return tg != nil && tg.Endpoint != nil
}

// proveTasksGone waits, up to timeout, until each task's driver proves
// that nothing of the task runs any more (driver.GoneProver: native, no
// process left in its process group; docker, its container removed), then
// records the member stopped. A task whose driver cannot prove it, or
// whose processes outlive the timeout, sets goneErr: the allocation then
// ends failed, saying so, rather than complete.
func (ar *allocRunner) proveTasksGone(timeout time.Duration) {
	ar.mu.Lock()
	trs := make([]*taskRunner, 0, len(ar.tasks))
	for _, tr := range ar.tasks {
		trs = append(trs, tr)
	}
	ar.mu.Unlock()
	deadline := time.Now().Add(timeout)
	var problems []string
	for _, tr := range trs {
		h := tr.lastHandle.Load()
		if h == nil {
			continue // never started: nothing to prove
		}
		gp, ok := tr.drv.(driver.GoneProver)
		if !ok {
			problems = append(problems, fmt.Sprintf("task %q: the %s driver cannot prove its processes are gone", tr.task.Name, tr.drv.Name()))
			continue
		}
		for {
			err := gp.TaskGone(h)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				problems = append(problems, fmt.Sprintf("task %q: %v", tr.task.Name, err))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ar.mu.Lock()
	st := structs.EndpointMemberStatus{Reason: reasonStopped, UpdatedAt: time.Now().UnixNano()}
	if ar.endpointMember != nil {
		st.Identity = ar.endpointMember.Identity
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		ar.goneErr = clipReason(fmt.Sprint(problems))
		st.Reason = clipReason("stopped, but " + ar.goneErr)
		ar.logger.Error("endpoint member processes outlived the stop", "problems", problems)
	}
	ar.endpointMember = &st
	ar.mu.Unlock()
}
