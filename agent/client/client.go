// Package client is the worker side of GPUlayer: it fingerprints the host
// (CPU, memory, GPUs, drivers), registers the node with the servers, keeps
// it alive with heartbeats, watches the node's allocations with a blocking
// query and runs each one with an alloc runner, reporting status back.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/structs"
)

// Client is a running client agent. Create it with NewClient and stop it
// with Shutdown.
type Client struct {
	cfg    *Config
	logger hclog.Logger
	state  *stateDB
	sync   *allocSyncer

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	node    *structs.Node
	ttl     time.Duration
	runners map[string]*allocRunner
	// finished holds the final status of allocations finished in an
	// earlier life of this client, from the state file.
	finished map[string]*allocRecord
	// archiving holds, by allocation, a channel closed once the log
	// archive an earlier life of this client left pending is uploaded
	// (resumeLogArchives); the directory is not collected before.
	archiving map[string]chan struct{}
	// recovered holds the task handles an earlier life of this client
	// recorded, by allocation and task, until the allocation is seen again.
	recovered map[string]map[string]*driver.TaskHandle
	// starts holds the allocation starts (Unix nanoseconds) an earlier
	// life recorded for max_run_duration (deadline.go), until a runner
	// takes them or applyAllocs prunes them.
	starts map[string]int64
	// tel is the GPU telemetry (telemetry.go).
	tel telemetry
	// endpoints runs the routers of this node's endpoints (endpoints.go).
	endpoints *endpointManager

	// regMu serialises registrations, so the last one sent carries the
	// newest node.
	regMu sync.Mutex
	// healthDirty asks healthRegisterLoop (health.go) to register the node
	// again after a device health change.
	healthDirty chan struct{}

	shutdownOnce sync.Once
}

// NewClient fingerprints the host, restores the allocations an earlier
// life of it recorded (restoreAllocs: reattached, serving) and starts the
// status sync, telemetry and GPU health loops; it registers the node in
// the background, retrying with backoff until a server takes it, then
// starts the heartbeat and the alloc watch. It returns once the node is
// registered, or after cfg.RegisterTimeout with the registration still
// retrying (servers unreachable: it logs so and serves from local
// state). Errors: a bad config (wrapping structs.ErrInvalid), an unusable
// DataDir or state file.
func NewClient(cfg *Config) (*Client, error) {
	c0, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c0.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create client data dir: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(c0.DataDir, "allocs"), 0o700); err != nil {
		return nil, fmt.Errorf("create allocs dir: %w", err)
	}
	if os.Geteuid() == 0 {
		// Tasks run as another user (native tasks as "nobody" by
		// default) must reach their directories: others may search, not
		// list, the client's directory and the allocs directory. Files
		// in them keep their own modes (state.db, node secret: 0600).
		if err := chmodDataDirs(c0.DataDir); err != nil {
			return nil, err
		}
		if blocked := unreachableParent(c0.DataDir); blocked != "" {
			c0.Logger.Warn("native tasks running as another user (nobody by default) cannot reach their directories: make this directory searchable (chmod o+x) or move the data directory", "dir", blocked)
		}
	}
	c := &Client{cfg: c0, logger: c0.Logger, runners: map[string]*allocRunner{}, tel: telemetry{idleSince: map[string]time.Time{}},
		healthDirty: make(chan struct{}, 1)}
	c.sync = newAllocSyncer(c0.Servers, c.logger, c0.SyncInterval)
	// Deployment health (health_check = "checks") asks this client's own
	// check runner (services.go) unless the config names another provider.
	if c.cfg.ChecksHealth == nil {
		c.cfg.ChecksHealth = c
	}

	node, err := c.buildNode()
	if err != nil {
		return nil, err
	}
	c.node = node
	if sc, ok := c0.ArtifactConn.(interface{ SetNodeSecret(id, secret string) }); ok {
		sc.SetNodeSecret(node.ID, node.SecretID)
	}
	c.state, err = openState(c0.DataDir)
	if err != nil {
		return nil, err
	}
	if c.finished, err = c.state.terminal(); err != nil {
		c.state.close()
		return nil, err
	}
	if c.recovered, err = c.state.handles(); err != nil {
		c.state.close()
		return nil, err
	}
	if c.starts, err = c.state.allocStarts(); err != nil {
		c.state.close()
		return nil, err
	}
	defs, err := c.state.allocDefs()
	if err != nil {
		c.state.close()
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())

	// Local state first, the servers after (as Nomad's client): the
	// allocations of an earlier life run again (reattached) and their
	// endpoints serve before, and whether or not, a server answers.
	c.endpoints = newEndpointManager(c, c0.newEndpointRouter())
	c.wg.Add(3)
	go func() { defer c.wg.Done(); c.endpoints.run(c.ctx) }()
	go func() { defer c.wg.Done(); c.sync.run(c.ctx) }()
	go func() { defer c.wg.Done(); c.telemetryLoop() }()
	restored := c.restoreAllocs(defs)

	registered := make(chan struct{})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if c.registerWithRetry(c.ctx) != nil {
			return // only when the client stops
		}
		close(registered)
		// The heartbeat and the alloc watch follow the registration: the
		// servers authenticate both by the node's secret.
		c.wg.Add(2)
		go func() { defer c.wg.Done(); c.heartbeatLoop() }()
		go func() { defer c.wg.Done(); c.watchAllocs() }()
	}()
	wait := time.NewTimer(c0.RegisterTimeout)
	select {
	case <-registered:
	case <-wait.C:
		c.logger.Warn("servers unreachable: serving from local state and registering in the background",
			"waited", c0.RegisterTimeout, "restored_allocs", restored)
	}
	wait.Stop()
	c.startHealth()
	c.resumeLogArchives()
	return c, nil
}

// buildNode assembles the node from the persisted identity and the
// fingerprint.
func (c *Client) buildNode() (*structs.Node, error) {
	id, err := loadOrCreateID(c.cfg.DataDir, "node-id")
	if err != nil {
		return nil, fmt.Errorf("node ID: %w", err)
	}
	secret, err := loadOrCreateID(c.cfg.DataDir, "node-secret")
	if err != nil {
		return nil, fmt.Errorf("node secret: %w", err)
	}
	n := &structs.Node{
		ID:                    id,
		SecretID:              secret,
		Name:                  c.cfg.NodeName,
		Datacenter:            c.cfg.Datacenter,
		NodeClass:             c.cfg.NodeClass,
		NodePool:              structs.NodePoolOrDefault(c.cfg.NodePool),
		HTTPAddr:              c.cfg.HTTPAddr,
		Attributes:            map[string]string{},
		Meta:                  map[string]string{},
		Drivers:               map[string]*structs.DriverInfo{},
		Status:                structs.NodeStatusReady,
		SchedulingEligibility: structs.NodeSchedulingEligible,
	}
	for k, v := range c.cfg.Meta {
		n.Meta[k] = v
	}
	if err := fingerprintHost(n); err != nil {
		return nil, err
	}
	if n.Name == "" {
		n.Name = n.Attributes["unique.hostname"]
	}
	for _, d := range c.cfg.Drivers {
		info := d.Fingerprint()
		n.Drivers[d.Name()] = info
		if info != nil && info.Detected && info.Healthy {
			n.Attributes["driver."+d.Name()] = "1"
		}
		if info != nil {
			for k, v := range info.Attributes {
				n.Attributes[k] = v
			}
		}
	}
	n.NodeResources.Devices = c.fingerprintDevices(id)
	// The host network: the address service instances register with and
	// the dynamic port range (services.go).
	n.NodeResources.Networks = []*structs.NetworkResource{{Mode: structs.NetworkModeHost, IP: c.cfg.networkAddress()}}
	n.NodeResources.MinDynamicPort, n.NodeResources.MaxDynamicPort = c.cfg.MinDynamicPort, c.cfg.MaxDynamicPort
	n.ReservedResources.Networks.ReservedHostPorts = c.cfg.ReservedPorts
	if err := c.applyNodeClass(n); err != nil {
		return nil, err
	}
	c.logger.Info("node fingerprinted", "node_id", id, "name", n.Name, "cpu_mhz", n.NodeResources.CPU,
		"memory_mib", n.NodeResources.MemoryMB, "device_groups", len(n.NodeResources.Devices))
	return n, nil
}

// Registration retry bounds: the first wait, and the most it doubles to.
const (
	registerRetry    = 250 * time.Millisecond
	maxRegisterRetry = 10 * time.Second
)

// registerWithRetry registers the node, retrying with exponential backoff
// (registerRetry doubling to maxRegisterRetry, each wait jittered so a
// fleet cut off together does not come back in step) until it succeeds or
// ctx ends.
func (c *Client) registerWithRetry(ctx context.Context) error {
	backoff := registerRetry
	for attempt := 1; ; attempt++ {
		err := c.register(ctx)
		if err == nil {
			if attempt > 1 {
				c.logger.Info("servers reachable again: node registered", "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("register node: %w (gave up: %v)", err, ctx.Err())
		}
		wait := jittered(backoff)
		if errors.Is(err, structs.ErrPermissionDenied) {
			// The usual cause: the servers' ACLs are on and this agent
			// has no token that may register nodes.
			c.logger.Error("the servers refused to register this node; retrying: give the agent a token whose policy has "+
				"node { policy = \"write\" } in acl { token = \"...\" } or -acl-token (website/docs/acl.md)",
				"error", err, "attempt", attempt, "retry_in", wait)
		} else {
			c.logger.Warn("node registration failed (servers unreachable?); retrying", "error", err, "attempt", attempt, "retry_in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("register node: %w (gave up: %v)", err, ctx.Err())
		case <-t.C:
		}
		backoff = min(backoff*2, maxRegisterRetry)
	}
}

func (c *Client) register(ctx context.Context) error {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	node := c.Node()
	ttl, err := c.cfg.Servers.NodeRegister(ctx, node)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.ttl = ttl
	c.mu.Unlock()
	c.logger.Info("node registered", "node_id", node.ID, "heartbeat_ttl", ttl)
	return nil
}

// heartbeatInterval is half the TTL less up to a tenth of it at random,
// so many clients do not beat in step; 1 second when the TTL is unknown.
func heartbeatInterval(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return time.Second
	}
	d := ttl / 2
	if j := int64(ttl / 10); j > 0 {
		d -= time.Duration(rand.Int64N(j))
	}
	return max(d, 10*time.Millisecond)
}

// heartbeatLoop keeps the node alive. A heartbeat the server answers with
// structs.ErrNotFound registers the node again; other errors retry sooner.
func (c *Client) heartbeatLoop() {
	failures := 0
	for {
		c.mu.Lock()
		wait := heartbeatInterval(c.ttl)
		c.mu.Unlock()
		if failures > 0 {
			wait = min(time.Duration(failures)*250*time.Millisecond, wait, 5*time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		ttl, err := c.heartbeat()
		switch {
		case err == nil:
			failures = 0
			if ttl > 0 {
				c.mu.Lock()
				c.ttl = ttl
				c.mu.Unlock()
			}
		case c.ctx.Err() != nil:
			return
		case errors.Is(err, structs.ErrNotFound):
			c.logger.Warn("server does not know this node; registering again")
			if err := c.register(c.ctx); err != nil {
				failures++
				c.logger.Warn("re-registration failed", "error", err)
			} else {
				failures = 0
			}
		default:
			failures++
			c.logger.Warn("heartbeat failed", "error", err, "failures", failures)
		}
	}
}

func (c *Client) nodeID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node.ID
}

// Node returns a copy of the node as registered.
func (c *Client) Node() *structs.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node.Copy()
}

// NumAllocs returns how many allocations the client holds a runner for,
// running or finished (finished ones keep their logs readable).
func (c *Client) NumAllocs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.runners)
}

// driver returns the configured driver named name, or nil.
func (c *Client) driver(name string) driver.Driver { return driverFor(c.cfg.Drivers, name) }

// Shutdown stops the loops and kills running tasks without reporting them
// to the servers (a restarted client finds them non-terminal and runs them
// again). Status updates queued before Shutdown are flushed for up to 2
// seconds. It is safe to call more than once.
func (c *Client) Shutdown() error {
	var err error
	c.shutdownOnce.Do(func() {
		c.logger.Info("client shutting down")
		c.mu.Lock()
		runners := make([]*allocRunner, 0, len(c.runners))
		for _, ar := range c.runners {
			runners = append(runners, ar)
		}
		c.mu.Unlock()
		c.cancel()
		c.wg.Wait()
		var wg sync.WaitGroup
		for _, ar := range runners {
			wg.Add(1)
			go func() { defer wg.Done(); ar.shutdown() }()
		}
		wg.Wait()
		// Drivers that keep something ready for the next task (the
		// native driver's idle shim) let it go.
		for _, d := range c.cfg.Drivers {
			if cl, ok := d.(interface{ Close() error }); ok {
				if cerr := cl.Close(); cerr != nil {
					c.logger.Warn("close driver", "driver", d.Name(), "error", cerr)
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if ferr := c.sync.flush(ctx); ferr != nil {
			c.logger.Warn("final status update failed", "error", ferr)
		}
		cancel()
		err = c.state.close()
	})
	return err
}

// AllocLogs streams a task's stdout or stderr (logType "stdout" or
// "stderr") from its oldest kept rotated file on. With follow it keeps
// streaming across rotations until ctx is done or the task is dead and
// everything was read (then io.EOF). Errors: structs.ErrNotFound for an
// unknown allocation or task, structs.ErrInvalid for another logType.
func (c *Client) AllocLogs(ctx context.Context, allocID, task, logType string, follow bool) (io.ReadCloser, error) {
	if logType != "stdout" && logType != "stderr" {
		return nil, fmt.Errorf("%w: log type must be \"stdout\" or \"stderr\", got %q", structs.ErrInvalid, logType)
	}
	if !pathElem(allocID) || !pathElem(task) {
		return nil, fmt.Errorf("%w: allocation %q task %q", structs.ErrNotFound, allocID, task)
	}
	c.mu.Lock()
	ar := c.runners[allocID]
	c.mu.Unlock()
	var dead func() bool
	if ar != nil {
		var tg *structs.TaskGroup
		if ar.alloc.Job != nil {
			tg = ar.alloc.Job.LookupTaskGroup(ar.alloc.TaskGroup)
		}
		if tg == nil || tg.LookupTask(task) == nil {
			return nil, fmt.Errorf("%w: task %q in allocation %s", structs.ErrNotFound, task, allocID)
		}
		dead = func() bool { return ar.taskDead(task) }
	} else {
		// An allocation from an earlier life of this client: its files
		// remain, and nothing runs.
		dead = func() bool { return true }
	}
	allocDir := filepath.Join(c.cfg.DataDir, "allocs", allocID)
	rel := task + "/logs"
	if ar == nil {
		// Only an allocation whose log directory exists (beneath its
		// allocation directory) is known.
		root, err := allocdir.OpenRoot(allocDir, rel)
		if err != nil {
			return nil, fmt.Errorf("%w: allocation %s", structs.ErrNotFound, allocID)
		}
		root.Close()
	}
	// A known task whose directory is not built yet: follow waits for it.
	return newLogReaderBeneath(ctx, allocDir, rel, task+"."+logType, follow, dead), nil
}

// pathElem reports whether s is a single, plain path element, so IDs from
// requests cannot walk out of the allocs directory.
func pathElem(s string) bool {
	return s != "" && s != "." && s != ".." && filepath.Base(s) == s && !strings.ContainsAny(s, `/\`)
}

// unreachableParent returns the first directory above dir that other
// users cannot pass through (no o+x), or "" when there is none.
func unreachableParent(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return p
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}

// chmodDataDirs sets the client's data directory and its allocs directory
// to allocDirMode through their descriptors (fstat, fchmod: what is
// checked is what changes). Both are the operator's and the agent's
// paths, which no task can change, so a symlink to them (an allocs
// directory on another disk) is followed.
func chmodDataDirs(dataDir string) error {
	for _, d := range []string{dataDir, filepath.Join(dataDir, "allocs")} {
		if err := chmodDir(d, allocDirMode); err != nil {
			return fmt.Errorf("let task users reach %s: %w", d, err)
		}
	}
	return nil
}

// chmodDir sets the mode of the directory path through its descriptor;
// a path that is not a directory is an error.
func chmodDir(path string, mode os.FileMode) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("not a directory (mode %s)", fi.Mode())
	}
	return f.Chmod(mode)
}
