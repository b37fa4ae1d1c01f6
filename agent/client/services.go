package client

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// ServiceConn is implemented by a ServerConn that takes service
// registrations (*server.Server in-process, HTTPServerConn remotely). A
// client whose servers lack it runs checks but registers nothing.
type ServiceConn interface {
	// NodeServices sends the node's instance changes; the servers accept
	// only the node's own allocations.
	NodeServices(ctx context.Context, nodeID string, req *structs.NodeServicesRequest) error
}

// Timings of the service runner.
const (
	// serviceReconcileInterval is how often instance health is re-derived
	// from task states and check results (and at once after each check).
	serviceReconcileInterval = 250 * time.Millisecond
	// serviceResendInterval is how often a healthy instance is registered
	// again, so one removed behind the client's back (a node marked down
	// and back, an operator's DELETE) comes back.
	serviceResendInterval = 30 * time.Second
	// serviceCallTimeout bounds one call to the servers.
	serviceCallTimeout = 5 * time.Second
	// serviceRetryDelay is how long the runner waits after a failed call
	// before it calls again.
	serviceRetryDelay = 2 * time.Second
)

// serviceRunner runs the checks of one allocation's services and keeps its
// healthy instances registered with the servers: an instance is healthy
// while its task (a group service: every task) runs and each of its checks
// passed its latest run; one without checks is healthy while its tasks
// run. It is created once the tasks start and stopped, deregistering
// everything, before they are killed.
type serviceRunner struct {
	ar        *allocRunner
	logger    hclog.Logger
	conn      ServiceConn
	instances []*svcInstance
	checks    []*checkRun

	mu sync.Mutex // guards the status of checks and instances

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	kick     chan struct{}
	stopOnce sync.Once
	// retryAt holds calls back after a failure (reconcileLoop only).
	retryAt time.Time
}

// svcInstance is one service of the allocation; registered says whether
// the servers may hold its registration.
type svcInstance struct {
	svc        *structs.Service
	reg        *structs.ServiceRegistration
	checks     []*checkRun
	registered bool
	sentAt     time.Time
}

type checkRun struct {
	inst   *svcInstance
	check  *structs.ServiceCheck
	addr   string // host:port for http and tcp checks
	status structs.CheckStatus
}

// newServiceRunner returns the runner of the group's services, or nil when
// it has none.
func newServiceRunner(ar *allocRunner, tg *structs.TaskGroup) *serviceRunner {
	services := tg.GroupServices()
	if len(services) == 0 {
		return nil
	}
	a := ar.alloc
	sr := &serviceRunner{ar: ar, logger: ar.logger.Named("services"), kick: make(chan struct{}, 1)}
	sr.conn, _ = ar.c.cfg.Servers.(ServiceConn)
	var shared *structs.AllocatedSharedResources
	if a.AllocatedResources != nil {
		shared = a.AllocatedResources.Shared
	}
	hostIP := "127.0.0.1"
	if n := ar.c.Node(); n != nil {
		hostIP = n.HostIP()
	}
	for _, s := range services {
		if s == nil {
			continue
		}
		owner := tg.Name
		if s.TaskName != "" {
			owner = s.TaskName
		}
		address, port := hostIP, 0
		if pm, ok := shared.Port(s.PortLabel); ok {
			port = pm.Value
			if pm.HostIP != "" {
				address = pm.HostIP
			}
		}
		// registered starts true: a registration left by an earlier life
		// of this client (restarted while its tasks ran on) is removed at
		// the first pass that finds the instance unhealthy. Deleting an
		// ID the servers do not hold costs no Raft entry.
		inst := &svcInstance{registered: true, svc: s, reg: &structs.ServiceRegistration{
			ID: structs.ServiceRegistrationID(a.ID, owner, s.Name, s.PortLabel), ServiceName: s.Name,
			NodeID: a.NodeID, JobID: a.JobID, AllocID: a.ID, Namespace: a.Namespace,
			Tags: append([]string(nil), s.Tags...), Address: address, Port: port,
		}}
		sr.instances = append(sr.instances, inst)
		for i, c := range s.Checks {
			if c == nil {
				continue
			}
			cr := &checkRun{inst: inst, check: c}
			label := c.PortLabel
			if label == "" {
				label = s.PortLabel
			}
			if pm, ok := shared.Port(label); ok {
				ip := pm.HostIP
				if ip == "" {
					ip = hostIP
				}
				cr.addr = net.JoinHostPort(ip, strconv.Itoa(pm.Value))
			}
			name := c.Name
			if name == "" {
				name = fmt.Sprintf("service: %q check", s.Name)
			}
			cr.status = structs.CheckStatus{
				ID: checkID(a.ID, owner, s.Name, i), Mode: "healthiness", Status: structs.CheckPending,
				Group: tg.Name, Task: c.CheckTask(s), Service: s.Name, Check: name,
			}
			inst.checks = append(inst.checks, cr)
			sr.checks = append(sr.checks, cr)
		}
	}
	return sr
}

// checkID is a check's stable ID within the client: a hash of its
// allocation, owner, service and place.
func checkID(allocID, owner, service string, i int) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d", allocID, owner, service, i)
	return fmt.Sprintf("%016x", h.Sum64())
}

// start launches one goroutine per check and the reconciler.
func (sr *serviceRunner) start(parent context.Context) {
	sr.ctx, sr.cancel = context.WithCancel(parent)
	for _, cr := range sr.checks {
		sr.wg.Add(1)
		go func() { defer sr.wg.Done(); sr.runCheck(cr) }()
	}
	sr.wg.Add(1)
	go func() { defer sr.wg.Done(); sr.reconcileLoop() }()
}

// stop ends the checks and, unless quiet, removes every registration of
// the allocation. It is idempotent and returns once all is done.
func (sr *serviceRunner) stop(quiet bool) {
	sr.stopOnce.Do(func() {
		sr.cancel()
		sr.wg.Wait()
		if quiet || sr.conn == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), serviceCallTimeout)
		defer cancel()
		if err := sr.conn.NodeServices(ctx, sr.ar.alloc.NodeID, &structs.NodeServicesRequest{DeleteAllocs: []string{sr.ar.alloc.ID}}); err != nil {
			// The servers drop them anyway once the allocation is
			// reported finished.
			sr.logger.Warn("deregister services", "error", err)
		}
		sr.mu.Lock()
		for _, inst := range sr.instances {
			inst.registered = false
		}
		sr.mu.Unlock()
	})
}

// taskRunning reports whether the check's or instance's task runs: the
// named task, or every task of the group when task is "".
func (sr *serviceRunner) taskRunning(task string) bool {
	ar := sr.ar
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if task != "" {
		ts := ar.taskStates[task]
		return ts != nil && ts.State == structs.TaskStateRunning
	}
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

// runCheck runs one check every Interval while its task runs, with its
// Timeout, and records each result.
func (sr *serviceRunner) runCheck(cr *checkRun) {
	interval := cr.check.Interval
	if interval < structs.MinCheckInterval {
		interval = structs.MinCheckInterval
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-sr.ctx.Done():
			return
		case <-timer.C:
		}
		task := cr.check.CheckTask(cr.inst.svc)
		if cr.check.Type != structs.ServiceCheckScript {
			task = cr.inst.svc.TaskName
		}
		if sr.taskRunning(task) {
			res := sr.runOnce(cr, task)
			if sr.ctx.Err() != nil {
				return
			}
			status := structs.CheckFailure
			if res.ok {
				status = structs.CheckSuccess
			}
			sr.mu.Lock()
			changed := cr.status.Status != status
			cr.status.Status = status
			cr.status.StatusCode, cr.status.Output, cr.status.Timestamp = res.code, res.output, time.Now().Unix()
			sr.mu.Unlock()
			if changed {
				sr.logger.Debug("check status", "check", cr.status.Check, "status", cr.status.Status, "output", res.output)
				select {
				case sr.kick <- struct{}{}:
				default:
				}
			}
		}
		timer.Reset(interval)
	}
}

func (sr *serviceRunner) runOnce(cr *checkRun, task string) checkResult {
	ctx, cancel := context.WithTimeout(sr.ctx, checkTimeout(cr.check))
	defer cancel()
	switch cr.check.Type {
	case structs.ServiceCheckHTTP:
		if cr.addr == "" {
			return checkResult{output: "no port for this check"}
		}
		return runHTTPCheck(ctx, cr.addr, cr.check.Path)
	case structs.ServiceCheckTCP:
		if cr.addr == "" {
			return checkResult{output: "no port for this check"}
		}
		return runTCPCheck(ctx, cr.addr)
	case structs.ServiceCheckScript:
		sr.ar.mu.Lock()
		tr := sr.ar.tasks[task]
		sr.ar.mu.Unlock()
		if tr == nil || tr.drv == nil {
			return checkResult{output: fmt.Sprintf("task %q is not running", task)}
		}
		ex, ok := tr.drv.(driver.Execer)
		if !ok {
			return checkResult{output: fmt.Sprintf("the %s driver cannot run script checks", tr.drv.Name())}
		}
		return runScriptCheck(ctx, ex, tr.taskID(), cr.check)
	}
	return checkResult{output: fmt.Sprintf("unknown check type %q", cr.check.Type)}
}

// reconcileLoop keeps the servers' registrations in line with instance
// health.
func (sr *serviceRunner) reconcileLoop() {
	t := time.NewTicker(serviceReconcileInterval)
	defer t.Stop()
	for {
		sr.reconcile()
		select {
		case <-sr.ctx.Done():
			return
		case <-t.C:
		case <-sr.kick:
		}
	}
}

// reconcile registers instances that became healthy (and healthy ones
// due for a resend) and deregisters those that stopped being healthy, in
// one call. A failed call changes nothing locally: the next pass retries.
func (sr *serviceRunner) reconcile() {
	if sr.conn == nil || time.Now().Before(sr.retryAt) {
		return
	}
	type want struct {
		inst    *svcInstance
		healthy bool
	}
	var wants []want
	for _, inst := range sr.instances {
		wants = append(wants, want{inst, sr.taskRunning(inst.svc.TaskName)})
	}
	now := time.Now()
	req := &structs.NodeServicesRequest{}
	var up, down []*svcInstance
	sr.mu.Lock()
	for _, w := range wants {
		healthy := w.healthy
		for _, cr := range w.inst.checks {
			healthy = healthy && cr.status.Status == structs.CheckSuccess
		}
		switch {
		case healthy && (!w.inst.registered || now.Sub(w.inst.sentAt) > serviceResendInterval):
			req.Upsert = append(req.Upsert, w.inst.reg.Copy())
			up = append(up, w.inst)
		case !healthy && w.inst.registered:
			req.Delete = append(req.Delete, w.inst.reg.ID)
			down = append(down, w.inst)
		}
	}
	sr.mu.Unlock()
	if len(up) == 0 && len(down) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(sr.ctx, serviceCallTimeout)
	defer cancel()
	if err := sr.conn.NodeServices(ctx, sr.ar.alloc.NodeID, req); err != nil {
		if sr.ctx.Err() == nil {
			sr.logger.Warn("update service registrations", "error", err, "retry_in", serviceRetryDelay)
		}
		sr.retryAt = time.Now().Add(serviceRetryDelay)
		return
	}
	sr.mu.Lock()
	for _, inst := range up {
		inst.registered, inst.sentAt = true, now
	}
	for _, inst := range down {
		inst.registered = false
	}
	sr.mu.Unlock()
	for _, inst := range up {
		sr.logger.Debug("service registered", "service", inst.reg.ServiceName, "address", inst.reg.Address, "port", inst.reg.Port)
	}
	for _, inst := range down {
		sr.logger.Info("service deregistered: not healthy", "service", inst.reg.ServiceName)
	}
}

// statuses returns a copy of every check's latest result, by check ID.
func (sr *serviceRunner) statuses() map[string]*structs.CheckStatus {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	out := make(map[string]*structs.CheckStatus, len(sr.checks))
	for _, cr := range sr.checks {
		st := cr.status
		out[st.ID] = &st
	}
	return out
}

// passing reports whether every check passed its latest run, and whether
// there are any.
func (sr *serviceRunner) passing() (passing, has bool) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if len(sr.checks) == 0 {
		return false, false
	}
	for _, cr := range sr.checks {
		if cr.status.Status != structs.CheckSuccess {
			return false, true
		}
	}
	return true, true
}

// serviceRunnerOf returns the allocation's service runner, or nil.
func (c *Client) serviceRunnerOf(allocID string) (*serviceRunner, bool) {
	c.mu.Lock()
	ar := c.runners[allocID]
	c.mu.Unlock()
	if ar == nil {
		return nil, false
	}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return ar.services, true
}

// AllocCheckStatuses returns the latest result of each check of an
// allocation this client runs, by check ID (empty for an allocation
// without checks), and false for one it does not run.
func (c *Client) AllocCheckStatuses(allocID string) (map[string]*structs.CheckStatus, bool) {
	sr, ok := c.serviceRunnerOf(allocID)
	if !ok {
		return nil, false
	}
	if sr == nil {
		return map[string]*structs.CheckStatus{}, true
	}
	return sr.statuses(), true
}

// ChecksHealthy implements ChecksHealthProvider (deploy_health.go) for
// deployment health tracking (health_check = "checks"): known reports whether the allocation,
// which this client runs, has service checks at all; healthy whether
// every one of them passed its latest run. A check that has not run yet
// counts as not passing (known is true, healthy false), so a tracker waits
// for the first result instead of judging by task states. Both are false
// for an allocation this client does not run or one without checks.
func (c *Client) ChecksHealthy(allocID string) (healthy, known bool) {
	sr, ok := c.serviceRunnerOf(allocID)
	if !ok || sr == nil {
		return false, false
	}
	return sr.passing()
}

var _ ChecksHealthProvider = (*Client)(nil)
