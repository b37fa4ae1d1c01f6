package servertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Cluster is N in-process servers joined over Raft's in-memory transport,
// bootstrapped with one configuration (no gossip). Followers forward writes
// to the leader in-process (server.Config.LeaderLookup). Tests partition
// and heal servers by disconnecting their transports, and kill and restart
// them on the same data dir. Its methods are safe for concurrent use.
type Cluster struct {
	t     testing.TB
	opts  []Option
	mu    sync.Mutex
	nodes []*clusterNode
}

// clusterNode is one server slot: its config (data dir, name, address) and
// the running server, nil while killed.
type clusterNode struct {
	name    string
	addr    raft.ServerAddress
	dataDir string
	trans   *raft.InmemTransport
	srv     *server.Server
	// cut holds the addresses this node is partitioned from.
	cut map[raft.ServerAddress]bool
	// acks holds this node's replication goroutines holding an answer
	// Raft may not have counted yet (cuttable).
	acks map[ackKey]bool
}

// ClusterRaftTuning sets Raft's timeouts for an in-memory cluster: failover
// in one to two seconds, and no leadership lost to a starved scheduler. At
// 300 ms heartbeats and a 200 ms lease, leaders stepped down mid-write in a
// make test run beside other builds on 2 cores (load average 20 under
// -race: "leadership lost while committing log" in tests that kill no one),
// because a heartbeat goroutine that does not run for 200 ms looks like a
// lost quorum. A lease as long as the heartbeat timeout (the most Raft
// allows) leaves a second of slack.
func ClusterRaftTuning(c *raft.Config) {
	c.HeartbeatTimeout = time.Second
	c.ElectionTimeout = time.Second
	c.LeaderLeaseTimeout = time.Second
	c.CommitTimeout = 5 * time.Millisecond
}

// NewCluster starts n servers named "server-0" … "server-(n-1)" with opts
// applied to each config (a WithConfig option may look at c.NodeName), waits
// for a leader and shuts every server down when the test ends.
func NewCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t, opts: opts}
	var peers []raft.Server
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("server-%d", i)
		nd := &clusterNode{name: name, addr: raft.ServerAddress(name), dataDir: t.TempDir(), cut: map[raft.ServerAddress]bool{}, acks: map[ackKey]bool{}}
		c.nodes = append(c.nodes, nd)
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(name), Address: nd.addr})
	}
	for i := range c.nodes {
		if err := c.start(i, peers); err != nil {
			t.Fatalf("servertest: %v", err)
		}
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.Kill(i)
		}
	})
	c.WaitForLeader()
	return c
}

// start creates node i's transport, connects it both ways to every running
// node it is not partitioned from, and starts its server.
func (c *Cluster) start(i int, peers []raft.Server) error {
	c.mu.Lock()
	nd := c.nodes[i]
	_, trans := raft.NewInmemTransport(nd.addr)
	nd.trans = trans
	clear(nd.acks)
	for _, o := range c.nodes {
		if o == nd || o.srv == nil || nd.cut[o.addr] {
			continue
		}
		trans.Connect(o.addr, o.trans)
		o.trans.Connect(nd.addr, trans)
	}
	c.mu.Unlock()
	cfg := &server.Config{
		DataDir:        nd.dataDir,
		NodeName:       nd.name,
		NumSchedulers:  2,
		Transport:      &cuttable{InmemTransport: trans, c: c, nd: nd},
		Logger:         hclog.NewNullLogger(),
		BootstrapPeers: peers,
		RaftTuning:     ClusterRaftTuning,
		LeaderLookup:   func(addr string) *server.Server { return c.lookupFrom(i, addr) },
	}
	for _, o := range c.opts {
		o(cfg)
	}
	srv, err := server.NewServer(cfg)
	if err != nil {
		return fmt.Errorf("start %s: %w", nd.name, err)
	}
	c.mu.Lock()
	nd.srv = srv
	c.mu.Unlock()
	return nil
}

// lookupFrom returns the running server with Raft address addr as server
// i reaches it for forwarding: nil when i is partitioned from it, so a
// forwarded write obeys partitions like Raft's own messages.
func (c *Cluster) lookupFrom(i int, addr string) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i].cut[raft.ServerAddress(addr)] {
		return nil
	}
	for _, nd := range c.nodes {
		if string(nd.addr) == addr {
			return nd.srv
		}
	}
	return nil
}

// Size returns the number of server slots.
func (c *Cluster) Size() int { return len(c.nodes) }

// Server returns server i, nil while it is killed.
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv
}

// Servers returns the running servers.
func (c *Cluster) Servers() []*server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*server.Server
	for _, nd := range c.nodes {
		if nd.srv != nil {
			out = append(out, nd.srv)
		}
	}
	return out
}

// Addr returns server i's Raft address.
func (c *Cluster) Addr(i int) string { return string(c.nodes[i].addr) }

// Leader returns the index of a running server that is leader and is not
// cut off from a majority, or -1 (during a partition an old leader may
// still believe it leads for a moment).
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, nd := range c.nodes {
		if nd.srv != nil && nd.srv.IsLeader() && !c.isolatedLocked(i) {
			return i
		}
	}
	return -1
}

// isolatedLocked reports whether node i is cut from a majority.
func (c *Cluster) isolatedLocked(i int) bool {
	reach := 1
	for j, o := range c.nodes {
		if j != i && o.srv != nil && !c.nodes[i].cut[o.addr] {
			reach++
		}
	}
	return reach <= len(c.nodes)/2
}

// WaitForLeader waits until a server in the majority leads and has
// established leadership, failing the test after LeaderTimeout. It returns
// the leader's index.
func (c *Cluster) WaitForLeader() int {
	c.t.Helper()
	deadline := time.Now().Add(LeaderTimeout)
	for time.Now().Before(deadline) {
		if i := c.Leader(); i >= 0 {
			ctx, cancel := context.WithTimeout(context.Background(), LeaderTimeout)
			err := c.Server(i).WaitForLeader(ctx)
			cancel()
			if err == nil && c.Server(i).IsLeader() {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("servertest: no leader within %s", LeaderTimeout)
	return -1
}

// Follower returns the index of a running server in the majority that is
// not the leader, or -1.
func (c *Cluster) Follower() int {
	l := c.Leader()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, nd := range c.nodes {
		if i != l && nd.srv != nil && !c.isolatedLocked(i) {
			return i
		}
	}
	return -1
}

// Partition cuts server i off from every other server (both directions):
// its Raft messages are dropped until Heal. It returns once no leader
// holds an answer from across the cut that Raft has yet to count as an
// ack (cuttable), so a VerifyLeader issued after Partition is confirmed
// only by answers from its own side.
func (c *Cluster) Partition(i int) {
	c.t.Helper()
	c.mu.Lock()
	nd := c.nodes[i]
	for j, o := range c.nodes {
		if j == i {
			continue
		}
		nd.cut[o.addr] = true
		o.cut[nd.addr] = true
		if nd.trans != nil {
			nd.trans.Disconnect(o.addr)
		}
		if o.trans != nil {
			o.trans.Disconnect(nd.addr)
		}
	}
	c.mu.Unlock()
	waittest.For(c.t, LeaderTimeout, "answers from across the partition to be counted", c.pendingCutAcks)
}

// pendingCutAcks reports whether no running leader holds an uncounted
// answer from a server it is now cut from, else names one. A server that
// no longer leads has stopped its replication goroutines: its acks count
// for nothing.
func (c *Cluster) pendingCutAcks() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.nodes {
		if nd.srv == nil || !nd.srv.IsLeader() {
			continue
		}
		for k := range nd.acks {
			if nd.cut[k.target] {
				return false, fmt.Sprintf("%s holds an answer from %s (heartbeat %t)", nd.name, k.target, k.heartbeat)
			}
		}
	}
	return true, ""
}

// Heal reconnects every pair of running servers.
func (c *Cluster) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.nodes {
		clear(nd.cut)
	}
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			if a != b && a.srv != nil && b.srv != nil {
				a.trans.Connect(b.addr, b.trans)
			}
		}
	}
}

// Kill shuts server i down (its data dir stays) and disconnects it. It is
// a no-op for a server already killed.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	nd := c.nodes[i]
	srv := nd.srv
	nd.srv = nil
	c.mu.Unlock()
	if srv == nil {
		return
	}
	if err := srv.Shutdown(); err != nil {
		c.t.Errorf("servertest: shutdown %s: %v", nd.name, err)
	}
	c.mu.Lock()
	for _, o := range c.nodes {
		if o != nd && o.trans != nil {
			o.trans.Disconnect(nd.addr)
		}
	}
	c.mu.Unlock()
}

// Restart starts killed server i again on its data dir; it resumes from
// its Raft state and rejoins the cluster.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Server(i) != nil {
		c.t.Fatalf("servertest: restart %s: still running", c.nodes[i].name)
	}
	if err := c.start(i, nil); err != nil {
		c.t.Fatalf("servertest: %v", err)
	}
}

// Register registers job through the current leader, retrying while
// leadership moves (errors wrapping structs.ErrNotLeader), and fails the
// test after LeaderTimeout. It returns the response.
func (c *Cluster) Register(job *structs.Job) *structs.JobRegisterResponse {
	c.t.Helper()
	deadline := time.Now().Add(LeaderTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), LeaderTimeout)
		resp, err := c.Server(c.WaitForLeader()).JobRegister(ctx, job)
		cancel()
		if err == nil {
			return resp
		}
		if !errors.Is(err, structs.ErrNotLeader) || time.Now().After(deadline) {
			c.t.Fatalf("servertest: register %s: %v", job.ID, err)
		}
	}
}

// WaitForConvergence waits until every running server has applied the
// same last Raft index and holds the same state hash, failing the test
// after timeout. It returns the hash.
func (c *Cluster) WaitForConvergence(timeout time.Duration) string {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		hashes := map[string]bool{}
		var idx []uint64
		for _, s := range c.Servers() {
			h, i, err := stateHash(s)
			if err != nil {
				last = err.Error()
				break
			}
			hashes[h] = true
			idx = append(idx, i)
			last = h
		}
		if len(hashes) == 1 && allEqual(idx) {
			return last
		}
		last = fmt.Sprintf("%d distinct hashes, indexes %v", len(hashes), idx)
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("servertest: servers did not converge within %s: %s", timeout, last)
	return ""
}

func allEqual(v []uint64) bool {
	for _, x := range v {
		if x != v[0] {
			return false
		}
	}
	return true
}

// stateHash returns a server's state hash and latest applied index.
func stateHash(s *server.Server) (string, uint64, error) {
	st := s.State()
	h, err := st.Hash()
	if err != nil {
		return "", 0, err
	}
	i, err := st.LatestIndex()
	return h, i, err
}
