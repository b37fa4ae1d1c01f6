package server

import (
	"fmt"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Raft timings of servers on one LAN (RaftMultiplier 1). A follower that
// hears nothing from the leader for lanHeartbeatTimeout (checked at random
// intervals of 1 to 2 times it) stands for election; an election that
// does not settle is retried after 1 to 2 times lanElectionTimeout; a
// leader that cannot reach a majority for lanLeaderLeaseTimeout steps
// down. A leader killed outright is replaced, and the first write sent
// after the kill acknowledged, in 0.8 to 1 s on a loaded 2-core host
// (BenchmarkClusterFailover, median about 0.85 s: nearly all of it the
// survivors noticing the silence); at hashicorp/raft's (and Nomad's)
// defaults of 1000, 1000 and 500 ms it took about 2.5 s.
//
// The trade-off is stability: a leader whose heartbeats are late by the
// heartbeat timeout (a host starved of CPU, a disk stalling fsyncs, a
// congested link) is deposed although it is alive, and every change of
// leader costs the writes in flight a retry. At 400 ms a 3-server cluster
// on a 2-core host running two CPU-bound loops beside other engineers'
// builds (load average 4 to 20) kept one leader for a minute, twice
// (BenchmarkClusterLeaderStability: 0 elections); at 300 ms it saw one
// election and 10 failed writes in a minute. Where leaders change without
// a failure, raise server { raft_multiplier }.
//
// The lease is as long as the heartbeat timeout (the most Raft allows):
// it decides only how soon a leader cut off from its peers steps down,
// not how soon a dead one is replaced, and at 200 ms in-process test
// clusters lost leadership mid-write when a loaded make test starved the
// heartbeat goroutine ("leadership lost while committing log").
const (
	lanHeartbeatTimeout   = 400 * time.Millisecond
	lanElectionTimeout    = 400 * time.Millisecond
	lanLeaderLeaseTimeout = 400 * time.Millisecond
)

// MaxRaftMultiplier is the largest RaftMultiplier (Nomad's limit too): 4 s
// heartbeat timeouts, for servers across continents.
const MaxRaftMultiplier = 10

// RaftTimings returns Raft's heartbeat, election and leader lease timeouts
// for multiplier (0 means 1; see Config.RaftMultiplier).
func RaftTimings(multiplier int) (heartbeat, election, lease time.Duration) {
	m := time.Duration(max(multiplier, 1))
	return lanHeartbeatTimeout * m, lanElectionTimeout * m, lanLeaderLeaseTimeout * m
}

// checkRaftMultiplier returns an error wrapping structs.ErrInvalid for a
// multiplier outside 0 to MaxRaftMultiplier.
func checkRaftMultiplier(m int) error {
	if m < 0 || m > MaxRaftMultiplier {
		return fmt.Errorf("server: %w: raft multiplier %d: want 1 to %d", structs.ErrInvalid, m, MaxRaftMultiplier)
	}
	return nil
}
