// Package server is the GPUlayer server process: Raft (BoltDB log store,
// file snapshots), the leader loop, the eval broker, blocked evaluations,
// scheduler workers, the plan queue and plan applier, node heartbeats, and
// the endpoints the HTTP API and in-process clients call. Its shape follows
// Nomad's nomad/ package, in smaller files.
//
// # HA clusters
//
// Servers find each other over memberlist gossip (Config.SerfBindAddr,
// RetryJoin, EncryptKey; membership.go): each advertises its Raft and HTTP
// addresses, datacenter and bootstrap_expect in its gossip meta, and once
// BootstrapExpect servers of one datacenter are alive and none has Raft
// state, each bootstraps Raft with the same sorted configuration. The
// leader adds later servers as voters, removes servers that left, and
// removes a server that has failed for DeadServerCleanupThreshold only
// while the voters left are at least BootstrapExpect (autopilot.go).
//
// The calls the agent, its HTTP API and the CLI use:
//
//	Members() []Member                   gossip members (GET /v1/agent/members)
//	Join(addrs) (int, error)             join over gossip (PUT /v1/agent/join)
//	LeaderHTTPAddr() string              where followers forward writes
//	VerifyLeader(ctx) error              before a consistent read
//	RaftPeers() ([]RaftPeer, error)      GET /v1/operator/raft/configuration
//	RemoveRaftPeer(ctx, idOrAddr) error  DELETE /v1/operator/raft/peer
//	SnapshotSave(ctx, w) error           GET /v1/operator/snapshot (archive format in snapshot_archive.go)
//	SnapshotRestore(ctx, r) error        PUT /v1/operator/snapshot
//
// Write endpoints on a follower return errors wrapping structs.ErrNotLeader;
// agent/http forwards the HTTP request to the leader instead, and tests
// forward in-process with Config.LeaderLookup (forward.go). A node that
// misses its heartbeat is marked down and its allocations are stopped,
// marked lost and replaced elsewhere (node_lost.go). There is no per-group
// reschedule policy yet: lost allocations are always replaced, failed batch
// allocations are not (see server/scheduler's reconcile rules).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpulayer/gpulayer/server/artifacts"
	"github.com/gpulayer/gpulayer/server/fsm"
	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// DefaultRaftBindAddr is the Raft TCP address used when Config.RaftBindAddr
// is empty.
const DefaultRaftBindAddr = "127.0.0.1:4657"

// DefaultFailedFollowUpDelay is the base delay before a failed evaluation is
// retried. Nomad waits a minute (EvalFailedFollowupBaselineDelay); a GPU
// job queue on one workstation wants its retry sooner.
const DefaultFailedFollowUpDelay = 5 * time.Second

// Config configures a Server. Zero values take the defaults named on each
// field.
type Config struct {
	// DataDir holds Raft data under <DataDir>/raft/{raft.db,snapshots/}; it
	// is created with mode 0700. Required.
	DataDir string
	// NodeName is the server's name and Raft ID; empty means the hostname.
	NodeName string
	// RaftBindAddr is the Raft TCP address; empty means DefaultRaftBindAddr.
	// Ignored when Transport is set.
	RaftBindAddr string
	// BootstrapExpect is the number of servers to wait for before
	// bootstrapping Raft; 0 or 1 bootstraps a single server at once (later
	// servers join it). More needs SerfBindAddr (servers find each other
	// over memberlist) or BootstrapPeers.
	BootstrapExpect int
	// NumSchedulers is the number of scheduler workers; 0 means 2.
	NumSchedulers int
	// DevMode shortens Raft timeouts for a single node (a leader in well
	// under a second).
	DevMode bool
	// RaftMultiplier scales Raft's heartbeat, election and leader lease
	// timeouts (RaftTimings), as Nomad's raft_multiplier does: 1 (or 0,
	// the default) suits servers on one LAN; a WAN, or hosts so loaded that
	// leaders change without a failure, want more. 1 to MaxRaftMultiplier.
	RaftMultiplier int
	// Logger is the parent logger; nil means hclog.NewNullLogger().
	Logger hclog.Logger

	// Transport, when set, replaces the TCP transport (tests use
	// raft.NewInmemTransport). Shutdown closes it.
	Transport raft.Transport
	// RaftSnapshotThreshold, when positive, overrides the number of log
	// entries between Raft snapshots (tests use a small value).
	RaftSnapshotThreshold uint64
	// RaftSnapshotInterval, when positive, overrides how often Raft checks
	// whether to snapshot (tests use a small value).
	RaftSnapshotInterval time.Duration
	// MinHeartbeatTTL is the smallest heartbeat TTL handed to a node; zero
	// means DefaultMinHeartbeatTTL (10 seconds).
	MinHeartbeatTTL time.Duration
	// HeartbeatGrace is added to a node's TTL before it is marked down;
	// zero means DefaultHeartbeatGrace (10 seconds).
	HeartbeatGrace time.Duration
	// FailoverHeartbeatTTL is the first TTL given to every known node when
	// this server becomes leader; zero means DefaultFailoverHeartbeatTTL
	// (5 minutes).
	FailoverHeartbeatTTL time.Duration
	// FailedFollowUpDelay is the delay before a failed evaluation's
	// follow-up evaluation is handed to the broker, plus a random jitter of
	// up to the same again; zero means DefaultFailedFollowUpDelay
	// (5 seconds).
	FailedFollowUpDelay time.Duration
	// EvalBroker tunes the eval broker; zero values take its defaults.
	EvalBroker EvalBrokerConfig
	// GC tunes the leader's garbage collector (core_gc.go); zero values
	// take its defaults.
	GC GCConfig
	// PeriodicClock is the clock the leader's periodic launcher reads
	// (periodic.go); nil is time.Now. Tests inject one.
	PeriodicClock func() time.Time
	// MaxHeldChildren caps the held children of one parent
	// (endpoints_children.go); 0 is structs.MaxHeldChildren.
	MaxHeldChildren int

	// Cluster membership (see membership.go and doc.go).

	// SerfBindAddr is the memberlist (gossip) address, "host:port"
	// (DefaultSerfPort 4658 by convention; port 0 picks a free one). Empty
	// runs without gossip: a single server, or BootstrapPeers in tests.
	SerfBindAddr string
	// SerfAdvertiseAddr, when set, is the "host:port" other servers reach
	// this one's gossip at (needed when SerfBindAddr is 0.0.0.0).
	SerfAdvertiseAddr string
	// RetryJoin lists gossip addresses ("host" or "host:port") of other
	// servers to join at start, retried every RetryJoinInterval until one
	// join succeeds.
	RetryJoin []string
	// RetryJoinInterval is the pause between join attempts; zero means
	// DefaultRetryJoinInterval (5 seconds).
	RetryJoinInterval time.Duration
	// EncryptKey, when set, encrypts gossip with AES-GCM; it must be 16, 24
	// or 32 bytes and the same on every server.
	EncryptKey []byte
	// Datacenter is advertised to other servers; servers bootstrap only
	// with servers of their own datacenter. Empty means "dc1".
	Datacenter string
	// HTTPAddr is this agent's HTTP API address ("host:port"), advertised
	// so followers can forward writes to the leader's HTTP API.
	HTTPAddr string
	// BootstrapPeers, when set and the data dir holds no Raft state,
	// bootstraps Raft with exactly these servers (every server of the
	// cluster must be given the same list). Tests use it with in-memory
	// transports instead of gossip.
	BootstrapPeers []raft.Server
	// DeadServerCleanupThreshold is how long a server must have failed
	// (gossip) or been missing before the leader's autopilot removes it
	// from Raft, which it does only while the remaining voters are at
	// least BootstrapExpect; zero means DefaultDeadServerCleanupThreshold
	// (30 seconds).
	DeadServerCleanupThreshold time.Duration
	// ReconcileInterval is how often the leader reconciles gossip members
	// with the Raft configuration; zero means DefaultReconcileInterval
	// (1 second).
	ReconcileInterval time.Duration
	// LeaderLookup, when set, lets a follower's write endpoints forward to
	// the leader in-process: it returns the *Server whose Raft address is
	// addr, or nil. servertest clusters set it; agents forward over HTTP
	// (agent/http) instead.
	LeaderLookup func(addr string) *Server
	// RaftTuning, when set, is called with the Raft config before Raft
	// starts (tests shorten timeouts for multi-server clusters).
	RaftTuning func(*raft.Config)
	// MemberlistTuning, when set, is called with the memberlist config
	// before gossip starts (tests shorten probe and suspicion timers).
	MemberlistTuning func(*memberlist.Config)
	// RaftAdvertiseAddr, when set, is the Raft address other servers dial
	// ("host:port"); needed when RaftBindAddr is 0.0.0.0.
	RaftAdvertiseAddr string
	// RaftTLS, when set, runs Raft over mutual TLS: only servers with a
	// certificate for "server.<region>.gpulayer" may connect or be dialed
	// (raft_stream.go). Nil means plain TCP from known server addresses
	// only, with a start-up warning (dev mode: no check, loopback only).
	RaftTLS *RaftTLS
	// AllowUnauthenticatedGossip, when true, lets a server with gossip but
	// neither EncryptKey nor RaftTLS join other servers (BootstrapExpect >
	// 1, RetryJoin, Join) and lets its leader add gossip members as Raft
	// voters: anyone who reaches the gossip port then becomes a voter and
	// gets a copy of the whole Raft log (ACL secrets included). It is for
	// trusted lab networks only and is warned about at every start. False
	// (the default) refuses such a config with ErrUnauthenticatedGossip.
	AllowUnauthenticatedGossip bool
	// ArtifactPeerTLS, when set, makes this server's own pulls of artifact
	// blobs from other servers (artifact_sync.go) HTTPS with this client
	// configuration, which presents the server's certificate: peers serve
	// a server so identified without a token. Nil means plain HTTP, which
	// works only with ACLs off.
	ArtifactPeerTLS *tls.Config
	// ArtifactPeers, when set, returns the other servers' HTTP addresses
	// for artifact replication instead of the gossip members' (tests).
	ArtifactPeers func() []string
	// Provision configures the leader's provisioner of node pools with a
	// scaling policy (provision_loop.go).
	Provision ProvisionConfig
}

// Server is one GPUlayer server. Create it with NewServer and stop it with
// Shutdown. Its methods are safe for concurrent use.
type Server struct {
	config *Config
	logger hclog.Logger

	fsm           *fsm.FSM
	raft          *raft.Raft
	raftTransport raft.Transport
	raftStore     io.Closer
	// raftLogs is the Raft log (the cache over raftStore), read to tell
	// which committed entries the FSM still has to apply (consistency.go).
	raftLogs raft.LogStore
	leaderCh chan bool

	broker     *EvalBroker
	blocked    *BlockedEvals
	planQueue  *PlanQueue
	heartbeats *heartbeats
	// gpuUsage: nodes' latest GPU samples from their heartbeats (leader
	// memory only; for node pools' GPU idleness rules).
	gpuUsage gpuUsage
	// artifacts is the blob store under <DataDir>/artifacts
	// (endpoints_artifacts.go); blobGC carries digests whose metadata an
	// applied ArtifactDelete removed to blobRemovalLoop (core_gc_artifacts.go).
	artifacts *artifacts.Store
	blobGC    chan []string
	// artifactSync wakes artifactSyncLoop (artifact_sync.go).
	artifactSync chan struct{}
	// allocUpdates merges concurrent client status updates into one Raft
	// entry (alloc_update_batch.go).
	allocUpdates allocUpdateBatch
	// gcMu runs garbage collections one at a time (core_gc.go).
	gcMu sync.Mutex
	// acls caches resolved ACL tokens (acl.go).
	acls aclCache

	// established is true while this server is leader and has finished
	// establishing leadership (broker enabled, evaluations restored).
	established atomic.Bool
	// caughtUp latches once this server's state has caught up since it
	// started, so it may answer stale reads (consistency.go).
	caughtUp atomic.Bool
	// commits wraps the Raft transport to learn the leader's commit index;
	// nil when the transport cannot be wrapped (consistency.go).
	commits *commitTracker

	// members is the gossip membership; nil without SerfBindAddr.
	members *membership
	// fenceRaft and fenceMembers are raft and members for the Raft
	// listener's known-peer check (raft_stream.go), which runs on the
	// transport's goroutine from before either is set.
	fenceRaft    atomic.Pointer[raft.Raft]
	fenceMembers atomic.Pointer[membership]
	// bootstrapped is true once Raft has (or no longer needs) a bootstrap
	// configuration from this server.
	bootstrapped atomic.Bool

	// metrics are this server's Prometheus metrics (metrics.go).
	metrics *serverMetrics
	// provisionMetrics are the provisioner's counters (they outlive a
	// leadership).
	provisionMetrics *provision.Metrics
	// fatalCh receives the error that makes this server unusable (its FSM
	// halted); the agent stops on it (FatalCh).
	fatalCh chan error

	// endpointNamesMu serializes the registrations of jobs that declare
	// endpoints, so two of them cannot both pass the name check
	// (job_endpoint_names.go).
	endpointNamesMu sync.Mutex

	// queryCuts ends the blocking queries at each leader change
	// (query_leader_cut.go).
	queryCuts queryCuts

	shutdownCtx    context.Context
	shutdownCancel context.CancelFunc
	shutdownOnce   sync.Once
	shutdownErr    error
	wg             sync.WaitGroup
}

// NewServer opens the Raft stores under cfg.DataDir, bootstraps a
// single-server Raft cluster when the directory holds no Raft state, and
// starts the leader loop and the scheduler workers. It returns without
// waiting for leadership (see WaitForLeader). It returns an error wrapping
// structs.ErrInvalid for a bad config, also wrapping
// ErrUnauthenticatedGossip for a server that would join others
// (BootstrapExpect > 1 or RetryJoin) over gossip with neither EncryptKey
// nor RaftTLS.
func NewServer(cfg *Config) (*Server, error) {
	if cfg == nil {
		return nil, fmt.Errorf("server: %w: nil config", structs.ErrInvalid)
	}
	c := *cfg
	if c.DataDir == "" {
		return nil, fmt.Errorf("server: %w: data dir is required", structs.ErrInvalid)
	}
	if err := c.checkCluster(); err != nil {
		return nil, err
	}
	if err := checkRaftMultiplier(c.RaftMultiplier); err != nil {
		return nil, err
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("server: node name: %w", err)
		}
		c.NodeName = h
	}
	if c.RaftBindAddr == "" {
		c.RaftBindAddr = DefaultRaftBindAddr
	}
	if err := c.fillAdvertise(privateIP); err != nil {
		return nil, err
	}
	if c.NumSchedulers <= 0 {
		c.NumSchedulers = 2
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.MinHeartbeatTTL <= 0 {
		c.MinHeartbeatTTL = DefaultMinHeartbeatTTL
	}
	if c.HeartbeatGrace <= 0 {
		c.HeartbeatGrace = DefaultHeartbeatGrace
	}
	if c.FailedFollowUpDelay <= 0 {
		c.FailedFollowUpDelay = DefaultFailedFollowUpDelay
	}
	if c.FailoverHeartbeatTTL <= 0 {
		c.FailoverHeartbeatTTL = DefaultFailoverHeartbeatTTL
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		config:   &c,
		logger:   c.Logger,
		leaderCh: make(chan bool, 16),
		fatalCh:  make(chan error, 1),
		metrics:  newServerMetrics(),
		// Provisioning.
		provisionMetrics: provision.NewMetrics(),
		broker:           NewEvalBroker(c.EvalBroker),
		planQueue:        NewPlanQueue(),
		shutdownCtx:      ctx,
		shutdownCancel:   cancel,
	}
	s.blocked = NewBlockedEvals(s.broker)
	s.heartbeats = newHeartbeats()
	if err := s.openArtifactStore(); err != nil {
		cancel()
		return nil, fmt.Errorf("server: %w", err)
	}
	s.blobGC = make(chan []string, 64)
	s.artifactSync = make(chan struct{}, 1)
	f, err := fsm.New(fsm.Config{Logger: s.logger, OnCapacityFreed: s.blocked.Unblock, OnHalt: s.onFSMHalt,
		OnArtifactsDeleted: s.queueBlobRemoval, OnArtifactsUpserted: s.wakeArtifactSync})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("server: %w", err)
	}
	s.fsm = f
	if err := s.setupRaft(); err != nil {
		cancel()
		if cerr := s.shutdownRaft(); cerr != nil {
			s.logger.Error("cleanup after failed start", "error", cerr)
		}
		return nil, fmt.Errorf("server: %w", err)
	}
	s.watchLeaderForQueries(s.raft, s.shutdownCtx.Done())

	if err := s.setupMembership(ctx); err != nil {
		cancel()
		if cerr := s.shutdownRaft(); cerr != nil {
			s.logger.Error("cleanup after failed start", "error", cerr)
		}
		return nil, fmt.Errorf("server: %w", err)
	}

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.monitorLeadership(ctx)
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.blobRemovalLoop(ctx)
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.artifactSyncLoop(ctx)
	}()
	for i := 0; i < c.NumSchedulers; i++ {
		w := newWorker(s, i)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			w.run(ctx)
		}()
	}
	s.logger.Info("server started", "name", c.NodeName, "raft_addr", s.raftTransport.LocalAddr(), "schedulers", c.NumSchedulers)
	return s, nil
}

// Shutdown stops the workers and the leader loop, then Raft, and closes the
// Raft stores so the data dir can be opened again. It is safe to call more
// than once; later calls return the first call's error.
func (s *Server) Shutdown() error {
	s.shutdownOnce.Do(func() {
		s.logger.Info("server shutting down")
		s.shutdownCancel()
		s.wg.Wait()
		s.revokeLeadership()
		gerr := s.shutdownMembership()
		s.shutdownErr = errors.Join(gerr, s.shutdownRaft(), s.artifacts.Close())
	})
	return s.shutdownErr
}

// WaitForLeader waits until the cluster has a leader and, when this server
// is that leader, until it has finished establishing leadership (its eval
// broker accepts work). It returns ctx's error when ctx ends first and
// structs.ErrShutdown (wrapped) once the server shuts down.
func (s *Server) WaitForLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if s.raft.Leader() != "" && (!s.IsLeader() || s.established.Load()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for leader: %w", ctx.Err())
		case <-s.shutdownCtx.Done():
			return fmt.Errorf("wait for leader: %w", structs.ErrShutdown)
		case <-t.C:
		}
	}
}

// FatalCh returns a channel that receives one error when this server can
// no longer serve (its FSM halted on a log entry it cannot apply: the
// error names the Raft index and how to recover). The agent stops on it.
func (s *Server) FatalCh() <-chan error { return s.fatalCh }

// onFSMHalt reports a halted FSM on FatalCh and steps down if leading, so
// a server that cannot apply the log neither serves nor leads.
func (s *Server) onFSMHalt(err error) {
	select {
	case s.fatalCh <- err:
	default:
	}
	go func() {
		if s.raft != nil && s.IsLeader() {
			if lerr := s.raft.LeadershipTransfer().Error(); lerr != nil {
				s.logger.Warn("leadership transfer after fsm halt", "error", lerr)
			}
		}
	}()
}

// IsLeader reports whether this server is the Raft leader.
func (s *Server) IsLeader() bool { return s.raft.State() == raft.Leader }

// Leader returns the Raft address of the leader, or "" when none is known.
func (s *Server) Leader() string {
	addr, _ := s.raft.LeaderWithID()
	return string(addr)
}

// Peers returns the Raft addresses of the servers in the configuration.
func (s *Server) Peers() []string {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		s.logger.Warn("read raft configuration", "error", err)
		return nil
	}
	var out []string
	for _, srv := range f.Configuration().Servers {
		out = append(out, string(srv.Address))
	}
	return out
}

// Stats returns Raft's statistics ("raft.state", "raft.last_log_index",
// ...) and the server's ("broker.total_ready", "broker.total_unacked",
// "broker.total_pending", "broker.total_waiting" (held until WaitUntil),
// "broker.total_delayed" (nacked, awaiting re-delivery), "broker.total_failed",
// "blocked.total_blocked", "plan.queue_depth", "heartbeat.timers").
func (s *Server) Stats() map[string]string {
	out := map[string]string{}
	for k, v := range s.raft.Stats() {
		out["raft."+k] = v
	}
	b := s.broker.Stats()
	out["broker.total_ready"] = strconv.Itoa(b.TotalReady)
	out["broker.total_unacked"] = strconv.Itoa(b.TotalUnacked)
	out["broker.total_pending"] = strconv.Itoa(b.TotalPending)
	out["broker.total_waiting"] = strconv.Itoa(b.TotalWaiting)
	out["broker.total_delayed"] = strconv.Itoa(b.TotalDelayed)
	out["broker.total_failed"] = strconv.Itoa(b.TotalFailed)
	bl := s.blocked.Stats()
	out["blocked.total_blocked"] = strconv.Itoa(bl.TotalBlocked)
	out["blocked.total_unblocked"] = strconv.FormatUint(bl.TotalUnblocked, 10)
	out["plan.queue_depth"] = strconv.Itoa(s.planQueue.Depth())
	out["heartbeat.timers"] = strconv.Itoa(s.heartbeats.count())
	out["leader"] = strconv.FormatBool(s.IsLeader())
	out["server.name"] = s.config.NodeName
	return out
}

// State returns the current state store (for tests and in-process readers).
// It must not be written to.
func (s *Server) State() *state.StateStore { return s.fsm.State() }

// checkLeader returns an error wrapping structs.ErrNotLeader unless this
// server is the leader (also wrapping structs.ErrNoLeader when no leader is
// known), and structs.ErrShutdown once the server shuts down.
func (s *Server) checkLeader() error {
	if s.shutdownCtx.Err() != nil {
		return fmt.Errorf("server: %w", structs.ErrShutdown)
	}
	if !s.IsLeader() {
		if s.raft.Leader() == "" {
			return fmt.Errorf("server: %w (%w)", structs.ErrNotLeader, structs.ErrNoLeader)
		}
		return fmt.Errorf("server: %w", structs.ErrNotLeader)
	}
	return nil
}
