package server_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// gossipKey is a 32-byte AES key for the tests' encrypted gossip.
var gossipKey = []byte("0123456789abcdef0123456789abcdef")

// fastGossip shortens memberlist's probe and suspicion timers so a dead
// server is declared failed within a few seconds on loopback, with enough
// slack that a live one under -race on two cores is not.
func fastGossip(c *memberlist.Config) {
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 150 * time.Millisecond
	c.SuspicionMult = 2
	c.GossipInterval = 20 * time.Millisecond
	c.PushPullInterval = time.Second
	c.TCPTimeout = time.Second
}

// startGossipServer starts a server with TCP Raft and encrypted gossip on
// loopback ports the kernel picks, joining join.
func startGossipServer(t *testing.T, name string, expect int, join []string) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Config{
		DataDir:                    t.TempDir(),
		NodeName:                   name,
		RaftBindAddr:               "127.0.0.1:0",
		SerfBindAddr:               "127.0.0.1:0",
		RetryJoin:                  join,
		RetryJoinInterval:          100 * time.Millisecond,
		EncryptKey:                 gossipKey,
		BootstrapExpect:            expect,
		HTTPAddr:                   "http-" + name + ":4656",
		NumSchedulers:              1,
		DeadServerCleanupThreshold: time.Second,
		ReconcileInterval:          100 * time.Millisecond,
		RaftTuning:                 servertest.ClusterRaftTuning,
		MemberlistTuning:           fastGossip,
		Logger:                     hclog.NewNullLogger(),
	})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	return s
}

// gossipAddr returns s's own gossip address from its member list.
func gossipAddr(t *testing.T, s *server.Server, name string) string {
	t.Helper()
	for _, m := range s.Members() {
		if m.Name == name {
			return m.Addr
		}
	}
	t.Fatalf("%s not in its own member list", name)
	return ""
}

// raftIDs returns the voter IDs in s's Raft configuration; s nil (no
// leader yet) is an error.
func raftIDs(s *server.Server) (map[string]bool, error) {
	if s == nil {
		return nil, errors.New("no leader")
	}
	peers, err := s.RaftPeers()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range peers {
		if p.Voter {
			out[p.ID] = true
		}
	}
	return out, nil
}

// nonLeader returns the name of a running server that is not the leader.
func nonLeader(servers map[string]*server.Server) string {
	for name, s := range servers {
		if !s.IsLeader() {
			return name
		}
	}
	return ""
}

func leaderOf(servers map[string]*server.Server) *server.Server {
	for _, s := range servers {
		if s != nil && s.IsLeader() {
			return s
		}
	}
	return nil
}

// TestGossip_BootstrapJoinAndAutopilot: three servers with
// bootstrap_expect=3 find each other over encrypted gossip and bootstrap
// one Raft cluster; a fourth and a fifth join and are added as voters; one
// that leaves is removed at once; a dead server is removed once the
// remaining voters are at least bootstrap_expect, and kept while they
// would not be.
func TestGossip_BootstrapJoinAndAutopilot(t *testing.T) {
	servers := map[string]*server.Server{}
	servers["s0"] = startGossipServer(t, "s0", 3, nil)
	seed := gossipAddr(t, servers["s0"], "s0")
	servers["s1"] = startGossipServer(t, "s1", 3, []string{seed})
	servers["s2"] = startGossipServer(t, "s2", 3, []string{seed})

	waittest.NoErr(t, 20*time.Second, "a leader with three voters", func() (bool, error) {
		l := leaderOf(servers)
		if l == nil {
			return false, errors.New("no leader")
		}
		ids, err := raftIDs(l)
		return len(ids) == 3, err
	})
	leader := leaderOf(servers)
	var leaderName string
	for name, s := range servers {
		if s == leader {
			leaderName = name
		}
	}
	waittest.NoErr(t, 10*time.Second, "every server to know the leader's HTTP address", func() (bool, error) {
		for name, s := range servers {
			if got := s.LeaderHTTPAddr(); got != "http-"+leaderName+":4656" {
				return false, fmt.Errorf("%s sees leader HTTP %q", name, got)
			}
		}
		return true, nil
	})
	waittest.NoErr(t, 10*time.Second, "three alive members with their meta", func() (bool, error) {
		members := servers["s1"].Members()
		if len(members) != 3 {
			return false, fmt.Errorf("members %+v: want 3", members)
		}
		for _, m := range members {
			if m.Status != server.MemberAlive || m.RaftAddr == "" || m.Datacenter != server.DefaultDatacenter || m.BootstrapExpect != 3 {
				return false, fmt.Errorf("member %+v: want alive with raft address, dc1, expect 3", m)
			}
			if m.Leader != (m.Name == leaderName) {
				return false, fmt.Errorf("member %s leader=%v, leader is %s", m.Name, m.Leader, leaderName)
			}
		}
		return true, nil
	})

	// A fourth server joins through the Join API and becomes a voter.
	servers["s3"] = startGossipServer(t, "s3", 3, nil)
	if n, err := servers["s3"].Join([]string{seed}); err != nil || n < 1 {
		t.Fatalf("join: %d %v", n, err)
	}
	waittest.NoErr(t, 20*time.Second, "the fourth server added as a voter", func() (bool, error) {
		l := leaderOf(servers)
		if l == nil {
			return false, errors.New("no leader")
		}
		ids, err := raftIDs(l)
		return ids["s3"] && len(ids) == 4, err
	})
	// A write commits with four voters and reaches the new one. A change
	// of configuration may move leadership (a loaded host misses a
	// heartbeat): the write is retried as a client would, which is safe
	// since registering the same job again is an upsert. Any other error
	// fails at once.
	job := statetest.Job()
	job.ID = "after-join"
	waittest.NoErr(t, 20*time.Second, "the write committed", func() (bool, error) {
		l := leaderOf(servers)
		if l == nil {
			return false, nil
		}
		_, err := l.JobRegister(context.Background(), job)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, structs.ErrOutcomeUnknown), errors.Is(err, structs.ErrNotLeader), errors.Is(err, structs.ErrNoLeader):
			return false, nil
		}
		t.Fatalf("write: %v", err)
		return false, err
	})
	waittest.NoErr(t, 10*time.Second, "the new server to apply the write", func() (bool, error) {
		return jobOn(t, servers["s3"], job.ID), nil
	})

	// A fifth joins, then one follower leaves gracefully: the leader
	// removes it at once.
	servers["s4"] = startGossipServer(t, "s4", 3, []string{seed})
	waittest.NoErr(t, 20*time.Second, "the fifth server added as a voter", func() (bool, error) {
		ids, err := raftIDs(leaderOf(servers))
		return ids["s4"] && len(ids) == 5, err
	})
	leaving := nonLeader(servers)
	if err := servers[leaving].Leave(); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if err := servers[leaving].Shutdown(); err != nil {
		t.Fatal(err)
	}
	delete(servers, leaving)
	waittest.NoErr(t, 20*time.Second, "the server that left removed from raft", func() (bool, error) {
		ids, err := raftIDs(leaderOf(servers))
		return !ids[leaving] && len(ids) == 4, err
	})

	// Kill a follower: with four voters and bootstrap_expect 3, autopilot
	// removes it once it has failed for the threshold.
	victim := nonLeader(servers)
	if err := servers[victim].Shutdown(); err != nil {
		t.Fatal(err)
	}
	delete(servers, victim)
	waittest.NoErr(t, 20*time.Second, "the dead server removed from raft", func() (bool, error) {
		l := leaderOf(servers)
		if l == nil {
			return false, errors.New("no leader")
		}
		ids, err := raftIDs(l)
		return !ids[victim] && len(ids) == 3, err
	})

	// Kill another: three voters is bootstrap_expect, so its seat stays
	// until a replacement joins.
	second := nonLeader(servers)
	if err := servers[second].Shutdown(); err != nil {
		t.Fatal(err)
	}
	delete(servers, second)
	waittest.NoErr(t, 10*time.Second, "the second dead server seen as failed", func() (bool, error) {
		l := leaderOf(servers)
		if l == nil {
			return false, errors.New("no leader")
		}
		for _, m := range l.Members() {
			if m.Name == second {
				return m.Status == server.MemberFailed, nil
			}
		}
		return false, nil
	})
	// Well past the threshold (1 s) and many reconcile passes.
	time.Sleep(2500 * time.Millisecond)
	ids, err := raftIDs(leaderOf(servers))
	if err != nil || !ids[second] || len(ids) != 3 {
		t.Fatalf("raft voters %v (%v): want the dead server kept while voters = bootstrap_expect", ids, err)
	}
}

func TestGossip_ConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"expect without gossip", server.Config{BootstrapExpect: 3}, "needs a serf bind address"},
		{"negative expect", server.Config{BootstrapExpect: -1}, "must not be negative"},
		{"short key", server.Config{SerfBindAddr: "127.0.0.1:0", EncryptKey: []byte("short")}, "encrypt key is 5 bytes"},
		{"key without gossip", server.Config{EncryptKey: gossipKey}, "without a serf bind address"},
		{"bad serf addr", server.Config{SerfBindAddr: "nope"}, `serf bind address "nope"`},
		{"bad serf port", server.Config{SerfBindAddr: "127.0.0.1:99999"}, "not a number in 0-65535"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.DataDir = t.TempDir()
			cfg.NodeName = "bad"
			s, err := server.NewServer(&cfg)
			if err == nil {
				_ = s.Shutdown()
				t.Fatal("started with a bad config")
			}
			if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}

func TestGossip_JoinWithoutGossip(t *testing.T) {
	s := servertest.NewServer(t)
	if _, err := s.Join([]string{"127.0.0.1:1"}); !errors.Is(err, server.ErrNoGossip) || !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("join without gossip: %v", err)
	}
	m := s.Members()
	if len(m) != 1 || !m[0].Leader || m[0].Status != server.MemberAlive {
		t.Fatalf("members of a lone server: %+v", m)
	}
	if s.LeaderHTTPAddr() != "" {
		t.Fatalf("leader HTTP address %q without one configured", s.LeaderHTTPAddr())
	}
}
