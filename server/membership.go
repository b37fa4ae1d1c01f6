package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Membership defaults.
const (
	// DefaultSerfPort is the conventional gossip port.
	DefaultSerfPort = 4658
	// DefaultDatacenter is the datacenter of a server whose config names
	// none.
	DefaultDatacenter = "dc1"
	// DefaultRetryJoinInterval is the pause between RetryJoin attempts.
	DefaultRetryJoinInterval = 5 * time.Second
	// DefaultDeadServerCleanupThreshold is how long a server must have
	// failed before autopilot removes it from Raft (Consul's autopilot
	// default LastContactThreshold is 200 ms, ServerStabilizationTime 10 s;
	// Nomad removes dead servers after they are reaped by serf; 30 s is a
	// middle ground that survives a reboot-free restart).
	DefaultDeadServerCleanupThreshold = 30 * time.Second
	// DefaultReconcileInterval is how often the leader reconciles gossip
	// members with the Raft configuration.
	DefaultReconcileInterval = time.Second
	// memberlistUpdateTimeout bounds a meta update broadcast.
	memberlistUpdateTimeout = 5 * time.Second
)

// Member statuses, as `gpulayer server members` shows them.
const (
	MemberAlive  = "alive"
	MemberFailed = "failed"
	MemberLeft   = "left"
)

// Member is one server known through gossip.
type Member struct {
	// Name is the server's name, also its Raft ID.
	Name string
	// Addr is the gossip address, "host:port".
	Addr string
	// Status is MemberAlive, MemberFailed or MemberLeft.
	Status string
	// StatusSince is when Status last changed, as seen by this server.
	StatusSince time.Time
	// Datacenter, RaftAddr, HTTPAddr and BootstrapExpect come from the
	// server's gossip meta.
	Datacenter      string
	RaftAddr        string
	HTTPAddr        string
	BootstrapExpect int
	// HasRaftState reports whether the server had Raft state (it was
	// bootstrapped or joined a cluster) when it last updated its meta.
	HasRaftState bool
	// Leader reports whether the server is the Raft leader, as this server
	// sees it.
	Leader bool
}

// memberMeta is the gossip node meta of a server, JSON-encoded; it must fit
// memberlist.MetaMaxSize (512 bytes).
type memberMeta struct {
	Role     string `json:"role"`
	DC       string `json:"dc"`
	Raft     string `json:"raft"`
	HTTP     string `json:"http,omitempty"`
	Expect   int    `json:"expect"`
	HasState bool   `json:"state,omitempty"`
}

// ErrNoGossip is returned by Join on a server started without SerfBindAddr.
var ErrNoGossip = errors.New("gossip is not enabled on this server (no serf bind address)")

// ErrUnauthenticatedGossip is wrapped (with structs.ErrInvalid) by
// NewServer and Join when a server would join other servers over gossip
// that is neither encrypted (EncryptKey) nor backed by Raft over TLS
// (RaftTLS): anyone who reaches the gossip port could then join and be
// added as a Raft voter. Config.AllowUnauthenticatedGossip opts out.
var ErrUnauthenticatedGossip = errors.New("gossip is neither encrypted nor authenticated by raft TLS: anyone who reaches the gossip port could become a raft voter; " +
	"set server { encrypt = \"<key>\" } (make a key with `gpulayer operator gossip keyring generate`, the same on every server) " +
	"or tls { rpc = true }, or, on a trusted lab network only, server { allow_unauthenticated_gossip = true }")

// gossipAuthenticated reports whether a gossip member can be trusted
// enough to become a Raft voter: gossip is encrypted with the cluster's
// key, or Raft runs over TLS so verifyRaftPeer proves a member's server
// certificate before it is added.
func (c *Config) gossipAuthenticated() bool {
	return len(c.EncryptKey) > 0 || c.RaftTLS != nil
}

// gossipVotersAllowed reports whether gossip members may be counted for
// bootstrap and added as Raft voters: gossip is authenticated, or the
// operator opted out with AllowUnauthenticatedGossip.
func (c *Config) gossipVotersAllowed() bool {
	return c.gossipAuthenticated() || c.AllowUnauthenticatedGossip
}

// checkCluster validates the membership part of the config.
func (c *Config) checkCluster() error {
	if c.BootstrapExpect < 0 {
		return fmt.Errorf("server: %w: bootstrap_expect %d: must not be negative", structs.ErrInvalid, c.BootstrapExpect)
	}
	if c.BootstrapExpect > 1 && c.SerfBindAddr == "" && len(c.BootstrapPeers) == 0 {
		return fmt.Errorf("server: %w: bootstrap_expect %d needs a serf bind address (servers find each other over gossip)", structs.ErrInvalid, c.BootstrapExpect)
	}
	switch n := len(c.EncryptKey); n {
	case 0, 16, 24, 32:
	default:
		return fmt.Errorf("server: %w: encrypt key is %d bytes; want 16, 24 or 32 (base64 of `gpulayer operator gossip keygen`)", structs.ErrInvalid, n)
	}
	if len(c.EncryptKey) > 0 && c.SerfBindAddr == "" {
		return fmt.Errorf("server: %w: encrypt key given without a serf bind address", structs.ErrInvalid)
	}
	if c.SerfBindAddr != "" && !c.gossipVotersAllowed() {
		switch {
		case c.BootstrapExpect > 1:
			return fmt.Errorf("server: %w: bootstrap_expect %d: %w", structs.ErrInvalid, c.BootstrapExpect, ErrUnauthenticatedGossip)
		case len(c.RetryJoin) > 0:
			return fmt.Errorf("server: %w: retry_join %v: %w", structs.ErrInvalid, c.RetryJoin, ErrUnauthenticatedGossip)
		}
	}
	for _, a := range []struct{ name, v string }{{"serf bind address", c.SerfBindAddr}, {"serf advertise address", c.SerfAdvertiseAddr}} {
		if a.v == "" {
			continue
		}
		if _, _, err := splitHostPort(a.v); err != nil {
			return fmt.Errorf("server: %w: %s %q: %v", structs.ErrInvalid, a.name, a.v, err)
		}
	}
	if c.Datacenter == "" {
		c.Datacenter = DefaultDatacenter
	}
	if c.RetryJoinInterval <= 0 {
		c.RetryJoinInterval = DefaultRetryJoinInterval
	}
	if c.DeadServerCleanupThreshold <= 0 {
		c.DeadServerCleanupThreshold = DefaultDeadServerCleanupThreshold
	}
	if c.ReconcileInterval <= 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	return nil
}

// splitHostPort parses "host:port" with a numeric port.
func splitHostPort(s string) (string, int, error) {
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number in 0-65535", ps)
	}
	return host, port, nil
}

// membership tracks the servers known through gossip.
type membership struct {
	s      *Server
	ml     *memberlist.Memberlist
	logger hclog.Logger

	mu      sync.Mutex
	members map[string]*Member
	// missingSince records, on the leader, when a Raft server without a
	// gossip member was first noticed (autopilot treats it as failed).
	missingSince map[raft.ServerID]time.Time

	// changed and reconcile are signalled (without blocking) on every
	// member event: the first wakes the bootstrap loop, the second the
	// leader's reconcile loop.
	changed   chan struct{}
	reconcile chan struct{}

	// proven caches the Raft addresses (by member name) whose TLS probe
	// succeeded during bootstrap; warned rate-limits the warning about
	// a member whose probe failed (raft_stream.go verifyRaftPeer).
	proven map[string]string
	warned map[string]time.Time
}

// unverifiedWarnInterval is how often the warning about one member that
// failed the Raft TLS probe repeats.
const unverifiedWarnInterval = 30 * time.Second

// verified runs the Raft TLS probe of mem once per Raft address.
func (m *membership) verified(mem Member) error {
	m.mu.Lock()
	ok := m.proven[mem.Name] == mem.RaftAddr && mem.RaftAddr != ""
	m.mu.Unlock()
	if ok {
		return nil
	}
	if err := m.s.verifyRaftPeer(mem.RaftAddr); err != nil {
		return err
	}
	m.mu.Lock()
	m.proven[mem.Name] = mem.RaftAddr
	m.mu.Unlock()
	return nil
}

// warnUnverified logs, at most every unverifiedWarnInterval per member,
// that a gossip member failed the Raft TLS probe, or (err wrapping
// ErrUnauthenticatedGossip) that gossip is not authenticated.
func (m *membership) warnUnverified(name, what string, err error) {
	m.mu.Lock()
	last, seen := m.warned[name]
	now := time.Now()
	if seen && now.Sub(last) < unverifiedWarnInterval {
		m.mu.Unlock()
		return
	}
	m.warned[name] = now
	m.mu.Unlock()
	if errors.Is(err, ErrUnauthenticatedGossip) {
		m.logger.Warn(what+": gossip is not authenticated, so its claim to be a server proves nothing", "server", name, "error", err)
		return
	}
	m.logger.Warn(what+": its raft address did not answer or did not prove a server certificate (a client certificate, another CA, or no TLS)", "server", name, "error", err)
}

// setupMembership starts memberlist when SerfBindAddr is set, and the loop
// that joins RetryJoin addresses, bootstraps Raft once BootstrapExpect
// servers are known and keeps this server's meta current.
func (s *Server) setupMembership(ctx context.Context) error {
	cfg := s.config
	if cfg.SerfBindAddr == "" {
		return nil
	}
	m := &membership{
		s:            s,
		logger:       s.logger.Named("gossip"),
		members:      map[string]*Member{},
		missingSince: map[raft.ServerID]time.Time{},
		changed:      make(chan struct{}, 1),
		reconcile:    make(chan struct{}, 1),
		proven:       map[string]string{},
		warned:       map[string]time.Time{},
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeName
	host, port, _ := splitHostPort(cfg.SerfBindAddr) // checked in checkCluster
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertisePort = port
	if cfg.SerfAdvertiseAddr != "" {
		ah, ap, _ := splitHostPort(cfg.SerfAdvertiseAddr)
		mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	}
	if len(cfg.EncryptKey) > 0 {
		mc.SecretKey = slices.Clone(cfg.EncryptKey)
	}
	mc.Delegate = (*memberDelegate)(m)
	mc.Events = (*memberEvents)(m)
	mc.Logger = m.logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	if cfg.MemberlistTuning != nil {
		cfg.MemberlistTuning(mc)
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("gossip: listen on %s: %w", cfg.SerfBindAddr, err)
	}
	m.ml = ml
	s.members = m
	s.fenceMembers.Store(m)
	// Read the local node before run can update it (UpdateNode).
	m.logger.Info("gossip started", "addr", ml.LocalNode().Address(), "encrypted", len(cfg.EncryptKey) > 0)
	if !cfg.gossipAuthenticated() {
		if cfg.AllowUnauthenticatedGossip {
			m.logger.Warn("UNAUTHENTICATED GOSSIP (allow_unauthenticated_gossip = true): anyone who reaches the gossip port " +
				"can join and be added as a raft voter with a copy of every secret in the raft log; use this on a trusted lab network only " +
				"and set server { encrypt } (gpulayer operator gossip keyring generate) or tls { rpc = true } everywhere else")
		} else {
			m.logger.Warn("gossip is neither encrypted nor authenticated by raft TLS: this server joins no other server and adds no gossip member to raft; " +
				"set server { encrypt } (gpulayer operator gossip keyring generate) or tls { rpc = true } to run a multi-server cluster")
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		m.run(ctx)
	}()
	return nil
}

// run retries the join, bootstraps Raft when enough servers are known and
// refreshes the meta once Raft has state, until ctx ends.
func (m *membership) run(ctx context.Context) {
	cfg := m.s.config
	joined := len(cfg.RetryJoin) == 0
	var nextJoin time.Time
	hadState := m.s.hasRaftState()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		if !joined && !time.Now().Before(nextJoin) {
			n, err := m.ml.Join(cfg.RetryJoin)
			if n > 0 {
				joined = true
				m.logger.Info("joined servers", "contacted", n, "addresses", cfg.RetryJoin)
			} else {
				m.logger.Warn("join failed; will retry", "addresses", cfg.RetryJoin, "interval", cfg.RetryJoinInterval, "error", err)
				nextJoin = time.Now().Add(cfg.RetryJoinInterval)
			}
		}
		m.maybeBootstrap()
		if st := m.s.hasRaftState(); st != hadState {
			hadState = st
			if err := m.ml.UpdateNode(memberlistUpdateTimeout); err != nil {
				m.logger.Warn("update gossip meta", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
		case <-t.C:
		}
	}
}

// maybeBootstrap bootstraps Raft with every alive server of this
// datacenter once at least BootstrapExpect of them are known and none has
// Raft state yet (Consul's maybeBootstrap). Every server computes the same
// configuration, sorted by name, so they agree. A server that sees another
// with Raft state does not bootstrap: it is part of an existing cluster,
// and the leader adds it.
func (m *membership) maybeBootstrap() {
	s := m.s
	expect := s.config.BootstrapExpect
	if expect <= 1 || s.bootstrapped.Load() {
		return
	}
	if s.hasRaftState() {
		s.bootstrapped.Store(true)
		return
	}
	var servers []Member
	for _, mem := range m.snapshot() {
		if mem.Status != MemberAlive || mem.Datacenter != s.config.Datacenter {
			continue
		}
		if mem.HasRaftState && mem.Name != s.config.NodeName {
			m.logger.Info("existing cluster found; waiting for its leader to add this server", "server", mem.Name)
			s.bootstrapped.Store(true)
			return
		}
		servers = append(servers, mem)
	}
	if len(servers) < expect {
		return
	}
	for _, mem := range servers {
		if mem.Name == s.config.NodeName {
			continue
		}
		if !s.config.gossipVotersAllowed() {
			m.warnUnverified(mem.Name, "not bootstrapping with server", ErrUnauthenticatedGossip)
			return
		}
		if err := m.verified(mem); err != nil {
			m.warnUnverified(mem.Name, "not bootstrapping with server", err)
			return
		}
	}
	for _, mem := range servers {
		if mem.BootstrapExpect != expect {
			m.logger.Error("servers disagree on bootstrap_expect; not bootstrapping", "server", mem.Name, "theirs", mem.BootstrapExpect, "ours", expect)
			return
		}
	}
	conf := raft.Configuration{}
	for _, mem := range servers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(mem.Name), Address: raft.ServerAddress(mem.RaftAddr)})
	}
	sort.Slice(conf.Servers, func(i, j int) bool { return conf.Servers[i].ID < conf.Servers[j].ID })
	if err := s.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		m.logger.Error("bootstrap raft", "error", err)
		return
	}
	s.bootstrapped.Store(true)
	m.logger.Info("bootstrapped raft cluster", "servers", len(conf.Servers), "expect", expect)
}

// notify signals a member change without blocking.
func (m *membership) notify() {
	for _, ch := range []chan struct{}{m.changed, m.reconcile} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// snapshot returns copies of the known members, sorted by name.
func (m *membership) snapshot() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.members))
	for _, mem := range m.members {
		out = append(out, *mem)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// member returns a copy of the named member.
func (m *membership) member(name string) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem, ok := m.members[name]
	if !ok {
		return Member{}, false
	}
	return *mem, true
}

// forget drops a member that left and is no longer in Raft.
func (m *membership) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.members, name)
}

// upsert records a node event; nodes whose meta is not a server's are
// ignored.
func (m *membership) upsert(n *memberlist.Node, status string) {
	var meta memberMeta
	if err := json.Unmarshal(n.Meta, &meta); err != nil || meta.Role != "server" {
		m.logger.Warn("ignoring gossip node without server meta", "node", n.Name, "addr", n.Address())
		return
	}
	m.mu.Lock()
	old := m.members[n.Name]
	mem := &Member{
		Name:            n.Name,
		Addr:            n.Address(),
		Status:          status,
		StatusSince:     time.Now(),
		Datacenter:      meta.DC,
		RaftAddr:        meta.Raft,
		HTTPAddr:        meta.HTTP,
		BootstrapExpect: meta.Expect,
		HasRaftState:    meta.HasState,
	}
	if old != nil && old.Status == status {
		mem.StatusSince = old.StatusSince
	}
	m.members[n.Name] = mem
	m.mu.Unlock()
	if old == nil || old.Status != status {
		m.logger.Info("server "+status, "server", n.Name, "addr", n.Address(), "raft_addr", meta.Raft)
	}
	m.notify()
}

// memberDelegate supplies this server's meta to memberlist.
type memberDelegate membership

func (d *memberDelegate) NodeMeta(limit int) []byte {
	s := d.s
	buf, err := json.Marshal(memberMeta{
		Role:     "server",
		DC:       s.config.Datacenter,
		Raft:     string(s.raftTransport.LocalAddr()),
		HTTP:     s.config.HTTPAddr,
		Expect:   s.config.BootstrapExpect,
		HasState: s.hasRaftState(),
	})
	if err != nil || len(buf) > limit {
		// Cannot happen with sane addresses; memberlist would panic on
		// oversized meta, so send none and let peers ignore this node.
		d.logger.Error("gossip meta too large or unencodable", "bytes", len(buf), "limit", limit, "error", err)
		return nil
	}
	return buf
}

func (d *memberDelegate) NotifyMsg([]byte)                           {}
func (d *memberDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *memberDelegate) LocalState(join bool) []byte                { return nil }
func (d *memberDelegate) MergeRemoteState(buf []byte, join bool)     {}

// memberEvents turns memberlist events into member statuses.
type memberEvents membership

func (e *memberEvents) NotifyJoin(n *memberlist.Node) { (*membership)(e).upsert(n, MemberAlive) }

func (e *memberEvents) NotifyUpdate(n *memberlist.Node) { (*membership)(e).upsert(n, MemberAlive) }

func (e *memberEvents) NotifyLeave(n *memberlist.Node) {
	status := MemberFailed
	if n.State == memberlist.StateLeft {
		status = MemberLeft
	}
	(*membership)(e).upsert(n, status)
}

// hasRaftState reports whether Raft has a configuration: it was
// bootstrapped, restored or joined a cluster.
func (s *Server) hasRaftState() bool {
	return s.raft.LastIndex() > 0
}

// Members returns the servers known through gossip, sorted by name, with
// the leader marked. A server without gossip returns itself alone.
func (s *Server) Members() []Member {
	_, leaderID := s.raft.LeaderWithID()
	if s.members == nil {
		return []Member{{
			Name:            s.config.NodeName,
			Status:          MemberAlive,
			Datacenter:      s.config.Datacenter,
			RaftAddr:        string(s.raftTransport.LocalAddr()),
			HTTPAddr:        s.config.HTTPAddr,
			BootstrapExpect: s.config.BootstrapExpect,
			HasRaftState:    s.hasRaftState(),
			Leader:          string(leaderID) == s.config.NodeName,
		}}
	}
	out := s.members.snapshot()
	for i := range out {
		out[i].Leader = out[i].Name == string(leaderID)
	}
	return out
}

// Join asks memberlist to contact the given gossip addresses ("host" or
// "host:port"; the port defaults to this server's gossip port) and returns
// how many it reached. It returns an error wrapping ErrNoGossip and
// structs.ErrInvalid without gossip, one wrapping structs.ErrInvalid for
// an empty list, one wrapping ErrUnauthenticatedGossip and
// structs.ErrInvalid when gossip is neither encrypted nor backed by Raft
// TLS (and AllowUnauthenticatedGossip is off), and memberlist's error when
// none could be reached.
func (s *Server) Join(addrs []string) (int, error) {
	if s.members == nil {
		return 0, fmt.Errorf("join: %w: %w", structs.ErrInvalid, ErrNoGossip)
	}
	if len(addrs) == 0 {
		return 0, fmt.Errorf("join: %w: no addresses", structs.ErrInvalid)
	}
	if !s.config.gossipVotersAllowed() {
		return 0, fmt.Errorf("join: %w: %w", structs.ErrInvalid, ErrUnauthenticatedGossip)
	}
	n, err := s.members.ml.Join(addrs)
	if err != nil && n == 0 {
		return 0, fmt.Errorf("join %v: %w", addrs, err)
	}
	return n, nil
}

// LeaderHTTPAddr returns the leader's advertised HTTP address
// ("host:port"), or "" when there is no leader or its address is unknown
// (no gossip and the leader is another server). agent/http forwards writes
// there.
func (s *Server) LeaderHTTPAddr() string {
	_, id := s.raft.LeaderWithID()
	if id == "" {
		return ""
	}
	if string(id) == s.config.NodeName {
		return s.config.HTTPAddr
	}
	if s.members == nil {
		return ""
	}
	mem, ok := s.members.member(string(id))
	if !ok {
		return ""
	}
	return mem.HTTPAddr
}

// Leave announces over gossip that this server is leaving the cluster for
// good, so the leader removes it from Raft at once rather than after
// DeadServerCleanupThreshold; call Shutdown afterwards. A leader first
// hands leadership to another server. It returns an error wrapping
// ErrNoGossip and structs.ErrInvalid without gossip, and the errors of the
// leadership transfer or the leave broadcast.
func (s *Server) Leave() error {
	if s.members == nil {
		return fmt.Errorf("leave: %w: %w", structs.ErrInvalid, ErrNoGossip)
	}
	if s.IsLeader() {
		if err := s.raft.LeadershipTransfer().Error(); err != nil {
			return fmt.Errorf("leave: transfer leadership: %w", err)
		}
	}
	if err := s.members.ml.Leave(memberlistUpdateTimeout); err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	s.logger.Info("left the cluster")
	return nil
}

// shutdownMembership stops gossip without a leave message: a restarted
// server keeps its Raft seat (Nomad's leave_on_terminate=false).
func (s *Server) shutdownMembership() error {
	if s.members == nil {
		return nil
	}
	if err := s.members.ml.Shutdown(); err != nil {
		return fmt.Errorf("gossip shutdown: %w", err)
	}
	return nil
}
