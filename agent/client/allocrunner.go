package client

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/structs"
)

// allocRunner runs one allocation: a task runner per task, the alloc's
// client status derived from their states, and stop on request.
type allocRunner struct {
	c        *Client
	logger   hclog.Logger
	allocDir string
	// alloc is the allocation as first received. It is never mutated, so
	// task runners read it without locking.
	alloc *structs.Allocation

	mu sync.Mutex
	// outputs are set once every task is dead and their uploads are done
	// (artifacts_hooks.go), sent with the final update; logArchive once
	// the log archive is uploaded after it, sent in an update of its own.
	outputs    []*structs.ArtifactRef
	logArchive string
	// collected is set once the outputs are uploaded (or there were
	// none): until then an allocation whose tasks are all dead still
	// reports running, so the servers never see it finished without its
	// outputs (a collector could remove it first), nor free its devices
	// while the uploads read its directory. The log archive is read from
	// files the tasks no longer write, after the final report.
	collected bool
	// logsPending is set from the final status report until the log
	// archive is uploaded (or failed): the state file says so meanwhile.
	logsPending   bool
	taskStates    map[string]*structs.TaskState
	tasks         map[string]*taskRunner
	clientStatus  string
	clientDesc    string
	stopRequested bool
	// stopRecorded is set once the servers' stop of the allocation is
	// recorded in the state file (applyAllocs).
	stopRecorded bool
	// quiet is set when the client shuts down: nothing more is reported.
	quiet bool
	// reportedFinal is set when the final status was reported at the
	// tasks' end, before the client began to shut down (run's early
	// report): finish then records it locally even if quiet.
	reportedFinal bool
	// services runs the checks and registrations of the group's services
	// (services.go); nil until the tasks start, or without services.
	services *serviceRunner
	// startDefs holds, by task, the allocation's restore record as of the
	// task's latest Started event, until putHandle writes it with the
	// task's handle.
	startDefs map[string]*structs.Allocation
	// recovered holds, by task name, the handles of tasks started by an
	// earlier life of this client, to reattach to.
	recovered map[string]*driver.TaskHandle
	// healthDeployment is the deployment whose health the tracker decides
	// (deploy_health.go), deployHealth its verdict once set.
	healthDeployment string
	deployHealth     *structs.AllocDeploymentStatus
	// priorStart is when an earlier life of this client started the
	// allocation (Unix nanoseconds; 0: it did not, or no task has a
	// max_run_duration), for its deadlines (deadline.go).
	priorStart int64

	// Endpoint members (endpoints.go): the identity computed for the
	// tasks' start epIdentityStart, and the router's status, sent with
	// every update. goneErr is set when the proof that the stopped
	// member's processes are gone failed (proveTasksGone).
	epIdentity      *structs.EndpointIdentity
	epIdentityErr   error
	epIdentityStart int64
	endpointMember  *structs.EndpointMemberStatus
	goneErr         string

	// delayCut is closed (cutShutdownDelay) when the client shuts down
	// or the servers mark the stop DesiredTransition.NoShutdownDelay: a
	// stop waiting out a shutdown_delay kills the tasks at once.
	delayCut     chan struct{}
	delayCutOnce sync.Once

	done chan struct{}
}

func newAllocRunner(c *Client, alloc *structs.Allocation) *allocRunner {
	return &allocRunner{
		c:            c,
		logger:       c.logger.Named("alloc_runner").With("alloc_id", alloc.ID),
		allocDir:     filepath.Join(c.cfg.DataDir, "allocs", alloc.ID),
		alloc:        alloc,
		taskStates:   map[string]*structs.TaskState{},
		tasks:        map[string]*taskRunner{},
		clientStatus: structs.AllocClientStatusPending,
		done:         make(chan struct{}),
		delayCut:     make(chan struct{}),
	}
}

func (ar *allocRunner) jobName() string {
	if ar.alloc.Job != nil {
		return ar.alloc.Job.Name
	}
	return ar.alloc.JobID
}

// taskRunnerConfig is what the task runner of t gets from this alloc
// runner and its client.
func (ar *allocRunner) taskRunnerConfig(t *structs.Task, rp *structs.RestartPolicy) taskRunnerConfig {
	c := ar.c
	return taskRunnerConfig{
		Alloc:          ar.alloc,
		AllocDir:       ar.allocDir,
		JobName:        ar.jobName(),
		Task:           t,
		Driver:         c.driver(t.Driver),
		Restart:        rp,
		Logger:         ar.logger,
		Ctx:            c.ctx,
		LogMaxFiles:    c.cfg.LogMaxFiles,
		LogMaxFileSize: c.cfg.logMaxFileSizeBytes,
		CPUMHzPerCore:  c.cpuMHzPerCore,
		Handles:        ar,
		UpdateState:    ar.updateTask,
		Prestart:       []taskPrestartHook{artifactsHook{cache: c.artifactCache}, dispatchPayloadHook{}},
	}
}

// run starts every task and returns once all are dead.
func (ar *allocRunner) run() {
	defer close(ar.done)
	tg, err := ar.prepare()
	if err != nil {
		ar.logger.Error("allocation cannot run", "error", err)
		ar.mu.Lock()
		ar.clientStatus, ar.clientDesc = structs.AllocClientStatusFailed, err.Error()
		ar.mu.Unlock()
		ar.finish(true)
		return
	}
	start := ar.allocStart(tg)
	ar.mu.Lock()
	for _, t := range tg.Tasks {
		tr := newTaskRunner(ar.taskRunnerConfig(t, tg.RestartPolicy))
		tr.recovered = ar.recovered[t.Name]
		ar.tasks[t.Name] = tr
	}
	ar.setDeadlines(tg, start)
	for _, t := range tg.Tasks {
		tr := ar.tasks[t.Name]
		var deadline int64
		if !tr.deadline.IsZero() {
			deadline = tr.deadline.UnixNano()
		}
		if prev := ar.alloc.TaskStates[t.Name]; tr.recovered != nil && prev != nil {
			// Reattaching: keep the task's history as last reported.
			ar.taskStates[t.Name] = prev.Copy()
			ar.taskStates[t.Name].Deadline = deadline
			continue
		}
		ar.taskStates[t.Name] = &structs.TaskState{
			State:    structs.TaskStatePending,
			Deadline: deadline,
			Events:   []*structs.TaskEvent{{Type: structs.TaskEventReceived, Time: time.Now().UnixNano(), Message: "Task received by client", DisplayMessage: "Task received by client"}},
		}
	}
	stop := ar.stopRequested
	ar.mu.Unlock()
	// Not reported by itself: each task's next event (its directory
	// built, its reattach, or its end) follows within moments and carries
	// the Received event with it, one update and Raft write fewer, and
	// the status stays pending until then either way.
	ar.trackDeploymentHealth(ar.alloc)
	stopTimers := ar.armDeadlines()
	defer stopTimers()

	for _, t := range tg.Tasks {
		tr := ar.tasks[t.Name]
		if tr.drv == nil {
			tr.dead(tr.event(structs.TaskEventDriverFailure, fmt.Sprintf("driver %q is not available on this node", t.Driver), nil), true)
			close(tr.ended)
			close(tr.done)
			continue
		}
		if stop {
			tr.kill()
		}
		go tr.run()
	}
	ar.mu.Lock()
	if !ar.stopRequested {
		if ar.services = newServiceRunner(ar, tg); ar.services != nil {
			ar.services.start(ar.c.ctx)
		}
	}
	svc := ar.services
	ar.mu.Unlock()
	for _, tr := range ar.tasks {
		<-tr.ended
	}
	// With nothing to collect (no endpoint whose processes must be proven
	// gone, no outputs written) the allocation is finished now: it is
	// reported so while the drivers destroy what the runs left (the
	// native shim's fsync of its exit file, a container's removal), which
	// only the local record and the directory's removal wait for.
	early := tg.Endpoint == nil && ar.outputsEmpty(tg.Tasks)
	if early {
		ar.stopServices(svc)
		svc = nil
		ar.mu.Lock()
		ar.collected = true
		ar.recompute()
		// Reported final before the client began to shut down: the
		// tasks ended by themselves, and the servers take the status
		// as final, so it is recorded even if the client shuts down
		// before the destroy returns (finish); a restarted client
		// must not run the allocation again.
		ar.reportedFinal = !ar.quiet
		ar.mu.Unlock()
	}
	// The tasks' final events (updateTask held them back).
	ar.changed()
	for _, tr := range ar.tasks {
		<-tr.done
	}
	if tg.Endpoint != nil {
		// An endpoint member is reported stopped only once every process
		// of it is proven gone.
		ar.proveTasksGone(memberGoneTimeout)
	}
	ar.stopServices(svc)
	ar.mu.Lock()
	quiet := ar.quiet
	ar.mu.Unlock()
	var outputs []*structs.ArtifactRef
	if !quiet {
		// Also after an early report: a process the task left behind
		// may have written outputs until its destroy; they are reported
		// in an update of their own.
		outputs = ar.collectOutputs(tg.Tasks)
	}
	// The log archive is uploaded after the final status is reported (it
	// is an upload and a Raft write on the path from the last exit to
	// "complete"): the state file records it pending first, so a client
	// killed before the upload makes it when it restarts, and ar.done
	// closes only after it, so the directory is never collected before.
	logsPending := ar.c.artifactStore() != nil && (!quiet || ar.reportedFinal)
	ar.mu.Lock()
	ar.outputs, ar.collected, ar.logsPending = outputs, true, logsPending
	ar.recompute()
	ar.mu.Unlock()
	ar.finish(!early || len(outputs) > 0)
	if logsPending && !quiet {
		names := make([]string, 0, len(tg.Tasks))
		for _, t := range tg.Tasks {
			names = append(names, t.Name)
		}
		ar.finishLogs(ar.c.archiveLogs(ar.alloc.ID, ar.alloc.JobID, names))
	}
}

// finishLogs records the uploaded log archive's digest ("" when none was
// made) with the final status, and reports it.
func (ar *allocRunner) finishLogs(digest string) {
	ar.mu.Lock()
	ar.logArchive, ar.logsPending = digest, false
	quiet := ar.quiet
	rec := &allocRecord{ClientStatus: ar.clientStatus, ClientDescription: ar.clientDesc, TaskStates: copyTaskStates(ar.taskStates)}
	ar.mu.Unlock()
	if quiet || (digest == "" && ar.c.ctx.Err() != nil) {
		// Shutting down (the upload may have failed for it): the record
		// stays pending and the next life of this client uploads the
		// archive.
		return
	}
	if err := ar.c.state.finishAlloc(ar.alloc.ID, rec); err != nil {
		ar.logger.Error("record final alloc status", "error", err)
	}
	if digest != "" {
		ar.changed()
	}
}

// allocDirMode is the mode of an allocation directory, and, when the
// agent runs as root, of the client and allocs directories above it: the
// owner (the agent) reads and writes, others may only pass through, so a
// task running as another user reaches its own task directory (which it
// owns) and nothing else.
const allocDirMode = 0o711

// prepare checks the allocation and builds its directory.
func (ar *allocRunner) prepare() (*structs.TaskGroup, error) {
	if ar.alloc.Job == nil {
		return nil, fmt.Errorf("allocation has no job")
	}
	tg := ar.alloc.Job.LookupTaskGroup(ar.alloc.TaskGroup)
	if tg == nil {
		return nil, fmt.Errorf("job %q has no task group %q", ar.alloc.Job.ID, ar.alloc.TaskGroup)
	}
	if len(tg.Tasks) == 0 {
		return nil, fmt.Errorf("task group %q has no tasks", tg.Name)
	}
	if err := os.MkdirAll(ar.allocDir, allocDirMode); err != nil {
		return nil, fmt.Errorf("create alloc directory: %w", err)
	}
	// MkdirAll's mode is cut by the umask. Through a descriptor opened
	// without following a symlink (the allocs directory is the agent's,
	// but the mode is set only on a directory, never through a link).
	if err := allocdir.ChmodDir(ar.allocDir, "", allocDirMode); err != nil {
		return nil, fmt.Errorf("create alloc directory: %w", err)
	}
	return tg, nil
}

// stopServices stops the group's checks and registrations (svc may be nil).
func (ar *allocRunner) stopServices(svc *serviceRunner) {
	if svc == nil {
		return
	}
	ar.mu.Lock()
	quiet := ar.quiet
	ar.mu.Unlock()
	svc.stop(quiet)
}

// outputsEmpty reports whether no task of tasks has written anything in
// its outputs directory (or has none). A directory that cannot be read is
// not empty: collectOutputs reports why.
func (ar *allocRunner) outputsEmpty(tasks []*structs.Task) bool {
	for _, t := range tasks {
		root, err := allocdir.OpenRoot(ar.allocDir, t.Name+"/outputs")
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return false
		}
		names, err := readDirNames(root, 1)
		root.Close()
		if err != nil || len(names) > 0 {
			return false
		}
	}
	return true
}

// readDirNames returns up to n names in root's directory.
func readDirNames(root *os.Root, n int) ([]string, error) {
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(n)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, err
}

// finish records the final status locally and, when report is set,
// reports it (an early report at the tasks' end already did otherwise).
func (ar *allocRunner) finish(report bool) {
	ar.mu.Lock()
	// A status reported final at the tasks' end is recorded even while
	// the client shuts down (its log archive then left to the next
	// life); any other is not, as shutdown killed the tasks.
	quiet := ar.quiet && !ar.reportedFinal
	rec := &allocRecord{ClientStatus: ar.clientStatus, ClientDescription: ar.clientDesc, TaskStates: copyTaskStates(ar.taskStates)}
	if ar.logsPending {
		rec.JobID, rec.LogsPending = ar.alloc.JobID, true
	}
	ar.mu.Unlock()
	if quiet {
		return
	}
	if structs.AllocClientStatusComplete == rec.ClientStatus || structs.AllocClientStatusFailed == rec.ClientStatus {
		if err := ar.c.state.finishAlloc(ar.alloc.ID, rec); err != nil {
			ar.logger.Error("record final alloc status", "error", err)
		}
	}
	ar.logger.Info("allocation finished", "client_status", rec.ClientStatus)
	if report {
		ar.changed()
	}
}

// updateTask appends an event to a task's state, applies mod, recomputes
// the alloc status and reports it. A task that failed kills its siblings.
func (ar *allocRunner) updateTask(name string, e *structs.TaskEvent, mod func(ts *structs.TaskState)) {
	ar.mu.Lock()
	ts := ar.taskStates[name]
	if ts == nil {
		ts = &structs.TaskState{State: structs.TaskStatePending}
		ar.taskStates[name] = ts
	}
	if e != nil {
		ts.Events = append(ts.Events, e)
		if len(ts.Events) > maxTaskEvents {
			ts.Events = ts.Events[len(ts.Events)-maxTaskEvents:]
		}
	}
	if mod != nil {
		mod(ts)
	}
	failed := ts.State == structs.TaskStateDead && ts.Failed
	ar.recompute()
	// Every task dead and the outputs not yet collected: run reports
	// once every task has ended, finished or still collecting, so the
	// last task's exit is not a report of its own that the final one
	// would queue behind.
	hold := !ar.collected && ar.allTasksDead()
	var siblings []*taskRunner
	if failed {
		for n, tr := range ar.tasks {
			if n != name {
				siblings = append(siblings, tr)
			}
		}
	}
	if e != nil && e.Type == structs.TaskEventStarted && !ar.quiet {
		// The record restoreAllocs rebuilds from keeps the task's
		// history, so a reattached task's Started event survives. It is
		// written with the task's handle (putHandle), which the task
		// runner waits for before it handles the task's exit (finishAlloc
		// removes the record, and must come after this write).
		d := *ar.alloc
		d.TaskStates = copyTaskStates(ar.taskStates)
		if ar.startDefs == nil {
			ar.startDefs = map[string]*structs.Allocation{}
		}
		ar.startDefs[name] = &d
	}
	ar.mu.Unlock()
	for _, tr := range siblings {
		tr.kill()
	}
	if !hold {
		ar.changed()
	}
}

// putHandle records a started task's handle (the task runner's
// taskHandleStore) with the allocation's record as of the task's Started
// event (updateTask), in one transaction.
func (ar *allocRunner) putHandle(allocID, task string, h *driver.TaskHandle) error {
	ar.mu.Lock()
	def := ar.startDefs[task]
	delete(ar.startDefs, task)
	ar.mu.Unlock()
	return ar.c.state.putHandleAndDef(allocID, task, h, def)
}

// allTasksDead reports whether every task is dead. Call with ar.mu held.
func (ar *allocRunner) allTasksDead() bool {
	for _, ts := range ar.taskStates {
		if ts.State != structs.TaskStateDead {
			return false
		}
	}
	return len(ar.taskStates) > 0
}

// maxTaskEvents bounds the events kept per task, as Nomad does (10).
const maxTaskEvents = 10

// recompute derives the alloc's client status from its task states:
// failed or complete once every task is dead, running while any task runs,
// else pending. Call with ar.mu held.
func (ar *allocRunner) recompute() {
	if len(ar.taskStates) == 0 {
		return
	}
	var running, dead int
	var failed, atDeadline []string
	for name, ts := range ar.taskStates {
		switch ts.State {
		case structs.TaskStateRunning:
			running++
		case structs.TaskStateDead:
			dead++
			if ts.Failed {
				failed = append(failed, name)
			}
			if failedAtDeadline(ts) {
				atDeadline = append(atDeadline, name)
			}
		}
	}
	switch {
	case dead == len(ar.taskStates) && !ar.collected:
		ar.clientStatus, ar.clientDesc = structs.AllocClientStatusRunning, "Tasks have ended; uploading outputs and logs"
	case dead == len(ar.taskStates) && ar.goneErr != "":
		ar.clientStatus, ar.clientDesc = structs.AllocClientStatusFailed, "Member processes outlived the stop: "+ar.goneErr
	case dead == len(ar.taskStates) && len(atDeadline) > 0:
		sort.Strings(atDeadline)
		ar.clientStatus, ar.clientDesc = structs.AllocClientStatusFailed, deadlineDescription(atDeadline)
	case dead == len(ar.taskStates) && len(failed) > 0:
		sort.Strings(failed)
		ar.clientStatus, ar.clientDesc = structs.AllocClientStatusFailed, "Failed tasks: "+strings.Join(failed, ", ")
	case dead == len(ar.taskStates):
		ar.clientStatus, ar.clientDesc = structs.AllocClientStatusComplete, "All tasks have completed"
	case running > 0:
		ar.clientStatus, ar.clientDesc = structs.AllocClientStatusRunning, "Tasks are running"
	default:
		ar.clientStatus, ar.clientDesc = structs.AllocClientStatusPending, "No tasks have started"
	}
}

// changed queues the alloc's current status for the servers.
func (ar *allocRunner) changed() {
	ar.mu.Lock()
	if ar.quiet {
		ar.mu.Unlock()
		return
	}
	up := &structs.Allocation{
		ID:                ar.alloc.ID,
		NodeID:            ar.alloc.NodeID,
		ClientStatus:      ar.clientStatus,
		ClientDescription: ar.clientDesc,
		TaskStates:        copyTaskStates(ar.taskStates),
		Outputs:           ar.outputs,
		LogArchive:        ar.logArchive,
		DeploymentStatus:  ar.deployHealth.Copy(),
		EndpointMember:    ar.endpointMember.Copy(),
	}
	ar.mu.Unlock()
	ar.c.sync.enqueue(up)
}

// update applies a newer copy of the allocation from the servers: a
// desired status of stop or evict stops every task; a running one that
// joined a deployment without a health verdict gets its health tracked.
func (ar *allocRunner) update(a *structs.Allocation) {
	if a.DesiredStatus == structs.AllocDesiredStatusRun {
		// An allocation updated in place into a new deployment without
		// a verdict is judged again.
		ar.trackDeploymentHealth(a)
		return
	}
	if a.DesiredTransition.NoShutdownDelay || a.DesiredStatus == structs.AllocDesiredStatusEvict {
		// A stop that must not wait (a drain's deadline, or an eviction:
		// the scheduler already placed the preemptor on the resources
		// this allocation frees): a wait already begun ends and the
		// tasks are killed now.
		ar.cutShutdownDelay()
	}
	ar.stopDelayed()
}

// markStopRecorded reports whether the servers' stop of the allocation
// is still to be recorded in the state file, and marks it recorded.
func (ar *allocRunner) markStopRecorded() bool {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.stopRecorded {
		return false
	}
	ar.stopRecorded = true
	return true
}

// stop kills every task at once; they end dead and not failed.
func (ar *allocRunner) stop() { ar.stopTasks(false) }

// stopDelayed stops the allocation as the servers asked: as stop, but the
// kills wait for the group's and each task's shutdown_delay
// (shutdown_delay.go) once the services are deregistered.
func (ar *allocRunner) stopDelayed() { ar.stopTasks(true) }

func (ar *allocRunner) stopTasks(delayed bool) {
	ar.mu.Lock()
	if ar.stopRequested {
		ar.mu.Unlock()
		return
	}
	ar.stopRequested = true
	trs := make([]*taskRunner, 0, len(ar.tasks))
	for _, tr := range ar.tasks {
		trs = append(trs, tr)
	}
	svc, quiet := ar.services, ar.quiet
	ar.mu.Unlock()
	ar.logger.Info("stopping allocation")
	// An endpoint member leaves its router's rotation (first: that asks
	// no server), and instances are deregistered, before their tasks are
	// killed, so no one is sent to an instance that is going away.
	if ar.c.endpoints != nil && ar.isEndpointMember() {
		ar.c.endpoints.leave(ar)
	}
	if svc != nil {
		svc.stop(quiet)
	}
	if delayed && !quiet && ar.killAfterShutdownDelay(trs) {
		return
	}
	for _, tr := range trs {
		tr.kill()
	}
}

// shutdown kills the tasks without reporting anything (the client is
// shutting down), waits for the runner to end and forgets the task
// handles.
func (ar *allocRunner) shutdown() {
	ar.mu.Lock()
	ar.quiet = true
	ar.mu.Unlock()
	ar.cutShutdownDelay()
	ar.stop()
	<-ar.done
	// The tasks were stopped: a restarted client starts them afresh
	// rather than reattaching.
	if err := ar.c.state.deleteHandles(ar.alloc.ID); err != nil {
		ar.logger.Warn("forget task handles", "error", err)
	}
}

// taskDead reports whether the task is dead, or unknown.
func (ar *allocRunner) taskDead(task string) bool {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	ts, ok := ar.taskStates[task]
	if !ok {
		select {
		case <-ar.done:
			return true
		default:
			return false
		}
	}
	return ts.State == structs.TaskStateDead
}

func copyTaskStates(m map[string]*structs.TaskState) map[string]*structs.TaskState {
	out := make(map[string]*structs.TaskState, len(m))
	for k, v := range m {
		out[k] = v.Copy()
	}
	return out
}

// driverFor returns the driver named name, or nil.
func driverFor(drivers []driver.Driver, name string) driver.Driver {
	for _, d := range drivers {
		if d.Name() == name {
			return d
		}
	}
	return nil
}
