// Package nodesim runs many simulated client nodes in one process against
// real servers, through the same HTTP API, node-secret auth and
// allocation change protocol (client.HTTPServerConn, client.AllocTracker)
// as a real client agent: each node registers with simulated GPUs of mixed
// models, heartbeats within its TTL as the client does (half the TTL less
// up to a tenth), reads what changed on its allocations, and acknowledges
// each new allocation as running and then, after RunFor, complete (a stop
// is acknowledged complete at once). Tasks do not run. It is for fleet
// measurements (the agent package's BenchmarkNodeSim) and tests, and
// checks as it goes that no GPU instance is given to two live allocations
// of a node.
package nodesim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpulayer/gpulayer/agent/client"
	"github.com/gpulayer/gpulayer/structs"
)

// Models are the GPU models of the simulated fleet, one per node in turn:
// name and memory in MiB.
var Models = []struct {
	Name      string
	MemoryMiB int64
	Compute   string
}{
	{"NVIDIA H100 80GB HBM3", 81559, "9.0"},
	{"NVIDIA A100-SXM4-40GB", 40960, "8.0"},
	{"NVIDIA L4", 23034, "8.9"},
	{"NVIDIA A10", 24576, "8.6"},
}

// Config configures a fleet.
type Config struct {
	// Servers are the servers' HTTP addresses ("127.0.0.1:4656").
	Servers []string
	// Nodes is the number of simulated nodes (1 to 100,000).
	Nodes int
	// GPUs is each node's number of GPU instances (0 to 64); the model
	// goes by the node's number (Models).
	GPUs int
	// RegisterToken is an ACL token allowed to register nodes.
	RegisterToken string
	// RunFor is how long an allocation runs before it is reported
	// complete; negative means it runs until stopped.
	RunFor time.Duration
	// Datacenter defaults to "dc1".
	Datacenter string
	// RegisterParallel bounds the registrations in flight (default 32).
	RegisterParallel int
	// FullPoll makes the nodes watch their allocations as clients did
	// before the change routes: a blocking GET /v1/node/{id}/allocations
	// answered by the leader with every allocation of the node and its
	// job. For before/after measurements.
	FullPoll bool
	// JSONOnly keeps the node routes in JSON (client.HTTPServerConnConfig
	// JSONOnly), for before/after measurements of their msgpack encoding.
	JSONOnly bool
}

// Stats are the fleet's counters so far.
type Stats struct {
	Registered        int64
	Heartbeats        int64
	HeartbeatFailures int64
	// Acked counts allocations reported running; Completed those
	// reported complete.
	Acked, Completed int64
	// UpdateFailures counts status reports the servers refused or that
	// did not reach them (retried).
	UpdateFailures int64
	WatchFailures  int64
	// GPUConflicts counts GPU instances found given to two live
	// allocations of one node: always 0 unless the plan applier erred.
	GPUConflicts int64
}

// Fleet is a running simulated fleet. Stop ends it.
type Fleet struct {
	cfg    Config
	conn   *client.HTTPServerConn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	nodes  []*simNode

	registered, heartbeats, hbFailures, acked, completed atomic.Int64
	updateFailures, watchFailures, gpuConflicts          atomic.Int64
}

// Start registers cfg.Nodes nodes and starts their heartbeats and
// allocation watches. It returns once every node is registered, or the
// first registration error (the fleet is then stopped).
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	switch {
	case len(cfg.Servers) == 0:
		return nil, fmt.Errorf("%w: nodesim: Servers: at least one is required", structs.ErrInvalid)
	case cfg.Nodes < 1 || cfg.Nodes > 100000:
		return nil, fmt.Errorf("%w: nodesim: Nodes: %d, want 1 to 100000", structs.ErrInvalid, cfg.Nodes)
	case cfg.GPUs < 0 || cfg.GPUs > 64:
		return nil, fmt.Errorf("%w: nodesim: GPUs: %d, want 0 to 64", structs.ErrInvalid, cfg.GPUs)
	}
	if cfg.Datacenter == "" {
		cfg.Datacenter = "dc1"
	}
	if cfg.RegisterParallel <= 0 {
		cfg.RegisterParallel = 32
	}
	// One connection per node's blocking query plus its other calls:
	// keep them all open, as the nodes' own agents would.
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 2*cfg.Nodes + 64,
		IdleConnTimeout:     90 * time.Second,
	}
	conn, err := client.NewHTTPServerConn(client.HTTPServerConnConfig{
		Servers: cfg.Servers, HTTPClient: &http.Client{Transport: tr}, RegisterToken: cfg.RegisterToken,
		RequestTimeout: 30 * time.Second, JSONOnly: cfg.JSONOnly,
	})
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithCancel(ctx)
	f := &Fleet{cfg: cfg, conn: conn, ctx: fctx, cancel: cancel}
	for i := 0; i < cfg.Nodes; i++ {
		f.nodes = append(f.nodes, newSimNode(f, i))
	}
	sem := make(chan struct{}, cfg.RegisterParallel)
	errc := make(chan error, 1)
	var rg sync.WaitGroup
	for _, n := range f.nodes {
		sem <- struct{}{}
		rg.Add(1)
		go func() {
			defer rg.Done()
			defer func() { <-sem }()
			ttl, err := n.register()
			if err != nil {
				select {
				case errc <- err:
				default:
				}
				return
			}
			f.registered.Add(1)
			f.wg.Add(2)
			go func() { defer f.wg.Done(); n.heartbeatLoop(ttl) }()
			go func() { defer f.wg.Done(); n.watchLoop() }()
		}()
		if len(errc) > 0 {
			break
		}
	}
	rg.Wait()
	select {
	case err := <-errc:
		f.Stop()
		return nil, err
	default:
	}
	return f, nil
}

// Stop ends every node's loops and waits for them. Nodes are not
// deregistered: the servers mark them down after their TTL.
func (f *Fleet) Stop() {
	f.cancel()
	f.wg.Wait()
}

// Stats returns the counters so far.
func (f *Fleet) Stats() Stats {
	return Stats{
		Registered: f.registered.Load(), Heartbeats: f.heartbeats.Load(), HeartbeatFailures: f.hbFailures.Load(),
		Acked: f.acked.Load(), Completed: f.completed.Load(), UpdateFailures: f.updateFailures.Load(),
		WatchFailures: f.watchFailures.Load(), GPUConflicts: f.gpuConflicts.Load(),
	}
}

// NodeIDs returns the simulated nodes' IDs.
func (f *Fleet) NodeIDs() []string {
	out := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.node.ID
	}
	return out
}

// simNode is one simulated client.
type simNode struct {
	f    *Fleet
	node *structs.Node
	// live maps each GPU instance to the live allocation holding it.
	mu   sync.Mutex
	live map[string]string
	// acked holds the allocations reported running (or complete).
	acked map[string]bool
}

func newSimNode(f *Fleet, i int) *simNode {
	id := structs.GenerateUUID()
	name := fmt.Sprintf("sim-%06d", i)
	n := &structs.Node{
		ID: id, SecretID: structs.GenerateUUID(), Name: name, Datacenter: f.cfg.Datacenter, NodeClass: "sim",
		Attributes: map[string]string{"kernel.name": "linux", "cpu.arch": "amd64", "cpu.numcores": "128",
			"driver.native": "1", "unique.hostname": name},
		Meta:                  map[string]string{},
		Drivers:               map[string]*structs.DriverInfo{"native": {Detected: true, Healthy: true}},
		NodeResources:         &structs.NodeResources{CPU: 256000, Cores: 128, MemoryMB: 1024 * 1024},
		ReservedResources:     &structs.NodeReservedResources{CPU: 1000, MemoryMB: 4096},
		Status:                structs.NodeStatusInit,
		SchedulingEligibility: structs.NodeSchedulingEligible,
	}
	if f.cfg.GPUs > 0 {
		m := Models[i%len(Models)]
		g := &structs.DeviceGroup{Vendor: structs.DeviceVendorNvidia, Type: structs.DeviceTypeGPU, Name: m.Name,
			Attributes: map[string]*structs.Attribute{"memory": structs.NewIntAttribute(m.MemoryMiB, "MiB"),
				"compute_capability": structs.NewStringAttribute(m.Compute)}}
		for k := 0; k < f.cfg.GPUs; k++ {
			g.Instances = append(g.Instances, &structs.DeviceInstance{ID: fmt.Sprintf("GPU-%s-%d", id[:8], k), Healthy: true,
				Locality: fmt.Sprintf("00000000:%02X:00.0", k+1)})
		}
		n.NodeResources.Devices = []*structs.DeviceGroup{g}
	}
	return &simNode{f: f, node: n, live: map[string]string{}, acked: map[string]bool{}}
}

func (n *simNode) register() (time.Duration, error) {
	ctx, cancel := context.WithTimeout(n.f.ctx, time.Minute)
	defer cancel()
	return n.f.conn.NodeRegister(ctx, n.node)
}

// heartbeatLoop heartbeats as the client does: half the TTL less up to a
// tenth at random; after a failure, again in a second.
func (n *simNode) heartbeatLoop(ttl time.Duration) {
	for {
		wait := ttl / 2
		if j := int64(ttl / 10); j > 0 {
			wait -= time.Duration(rand.Int64N(j))
		}
		t := time.NewTimer(max(wait, 10*time.Millisecond))
		select {
		case <-n.f.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next, err := n.f.conn.NodeUpdateStatus(n.f.ctx, n.node.ID, structs.NodeStatusReady)
		if n.f.ctx.Err() != nil {
			return
		}
		if err != nil {
			n.f.hbFailures.Add(1)
			if errors.Is(err, structs.ErrNotFound) {
				if t, err := n.register(); err == nil {
					next = t
				}
			}
			if next <= 0 {
				next = 2 * time.Second
			}
		} else {
			n.f.heartbeats.Add(1)
		}
		ttl = next
	}
}

// watchLoop follows the node's allocations and acknowledges them.
func (n *simNode) watchLoop() {
	if n.f.cfg.FullPoll {
		n.fullPollLoop()
		return
	}
	tr := client.NewAllocTracker(n.f.conn, n.node.ID)
	backoff := 250 * time.Millisecond
	for n.f.ctx.Err() == nil {
		all, changed, err := tr.Next(n.f.ctx, client.AllocWatchWait)
		if err != nil {
			if n.f.ctx.Err() != nil {
				return
			}
			n.f.watchFailures.Add(1)
			sleep(n.f.ctx, backoff)
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 250 * time.Millisecond
		n.apply(all, changed)
	}
}

// fullPollLoop is watchLoop with the full allocation list (Config.FullPoll).
func (n *simNode) fullPollLoop() {
	var index uint64
	seen := map[string]uint64{}
	backoff := 250 * time.Millisecond
	for n.f.ctx.Err() == nil {
		all, meta, err := n.f.conn.NodeAllocations(n.f.ctx, n.node.ID, &structs.QueryOptions{MinQueryIndex: index, MaxQueryTime: client.AllocWatchWait})
		if err != nil {
			if n.f.ctx.Err() != nil {
				return
			}
			n.f.watchFailures.Add(1)
			sleep(n.f.ctx, backoff)
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 250 * time.Millisecond
		index = meta.Index
		var changed []*structs.Allocation
		for _, a := range all {
			if seen[a.ID] != a.AllocModifyIndex {
				seen[a.ID] = a.AllocModifyIndex
				changed = append(changed, a)
			}
		}
		n.apply(all, changed)
	}
}

// apply acknowledges new allocations as running (one request for all)
// and stopped ones as complete, and checks GPU instances for double use.
func (n *simNode) apply(all, changed []*structs.Allocation) {
	var started, running, done []*structs.Allocation
	now := time.Now().UnixNano()
	n.mu.Lock()
	for _, a := range changed {
		switch {
		case a.ClientTerminalStatus():
			n.release(a.ID)
		case a.DesiredStatus != structs.AllocDesiredStatusRun:
			n.release(a.ID)
			done = append(done, status(a, structs.AllocClientStatusComplete, now))
		case !n.acked[a.ID]:
			n.acked[a.ID] = true
			for _, id := range a.DeviceIDs() {
				if holder, ok := n.live[id]; ok && holder != a.ID {
					n.f.gpuConflicts.Add(1)
				}
				n.live[id] = a.ID
			}
			started = append(started, a)
			running = append(running, status(a, structs.AllocClientStatusRunning, now))
		}
	}
	// Forget acknowledgements of allocations the servers dropped.
	if len(n.acked) > len(all) {
		keep := make(map[string]bool, len(all))
		for _, a := range all {
			if n.acked[a.ID] {
				keep[a.ID] = true
			}
		}
		n.acked = keep
	}
	n.mu.Unlock()
	if len(running) > 0 && n.report(running) {
		n.f.acked.Add(int64(len(running)))
		if n.f.cfg.RunFor >= 0 {
			n.f.wg.Add(1)
			go func() {
				defer n.f.wg.Done()
				if n.f.cfg.RunFor > 0 && !sleep(n.f.ctx, n.f.cfg.RunFor) {
					return
				}
				var fin []*structs.Allocation
				end := time.Now().UnixNano()
				n.mu.Lock()
				for _, a := range started {
					n.release(a.ID)
					fin = append(fin, status(a, structs.AllocClientStatusComplete, end))
				}
				n.mu.Unlock()
				if n.report(fin) {
					n.f.completed.Add(int64(len(fin)))
				}
			}()
		}
	}
	if len(done) > 0 && n.report(done) {
		n.f.completed.Add(int64(len(done)))
	}
}

// release frees the GPU instances held by allocation id. n.mu is held.
func (n *simNode) release(id string) {
	for gpu, holder := range n.live {
		if holder == id {
			delete(n.live, gpu)
		}
	}
}

// report sends the status updates, retrying while the fleet runs; it
// reports whether they were accepted.
func (n *simNode) report(allocs []*structs.Allocation) bool {
	backoff := 250 * time.Millisecond
	for n.f.ctx.Err() == nil {
		err := n.f.conn.UpdateAllocs(n.f.ctx, allocs)
		if err == nil {
			return true
		}
		n.f.updateFailures.Add(1)
		if errors.Is(err, structs.ErrNotFound) || errors.Is(err, structs.ErrInvalid) || errors.Is(err, structs.ErrPermissionDenied) {
			return false // garbage-collected or refused: nothing to retry
		}
		sleep(n.f.ctx, backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
	return false
}

// status is the update a client sends for a: its status and one task
// state per task.
func status(a *structs.Allocation, clientStatus string, now int64) *structs.Allocation {
	states := map[string]*structs.TaskState{}
	if tg := taskGroup(a); tg != nil {
		for _, t := range tg.Tasks {
			ts := &structs.TaskState{State: structs.TaskStateRunning, StartedAt: now,
				Events: []*structs.TaskEvent{{Type: "Started", Time: now}}}
			if clientStatus == structs.AllocClientStatusComplete {
				ts.State, ts.FinishedAt = structs.TaskStateDead, now
				ts.Events = append(ts.Events, &structs.TaskEvent{Type: "Terminated", Time: now, Details: map[string]string{"exit_code": "0"}})
			}
			states[t.Name] = ts
		}
	}
	return &structs.Allocation{ID: a.ID, NodeID: a.NodeID, ClientStatus: clientStatus, TaskStates: states}
}

func taskGroup(a *structs.Allocation) *structs.TaskGroup {
	if a.Job == nil {
		return nil
	}
	for _, tg := range a.Job.TaskGroups {
		if tg.Name == a.TaskGroup {
			return tg
		}
	}
	return nil
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
