package server

import (
	"errors"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestRaftTimings: the LAN timings scale with the multiplier (0 meaning
// 1), hashicorp/raft accepts every multiplier allowed, and NewServer
// refuses one outside 0 to MaxRaftMultiplier before touching the disk.
func TestRaftTimings(t *testing.T) {
	for _, m := range []int{0, 1, 3, MaxRaftMultiplier} {
		hb, el, lease := RaftTimings(m)
		want := time.Duration(max(m, 1))
		if hb != lanHeartbeatTimeout*want || el != lanElectionTimeout*want || lease != lanLeaderLeaseTimeout*want {
			t.Errorf("multiplier %d: %v %v %v", m, hb, el, lease)
		}
		if lease > hb || el < hb {
			t.Errorf("multiplier %d: lease %v must not pass heartbeat %v, election %v must reach it", m, lease, hb, el)
		}
	}
	for _, m := range []int{-1, MaxRaftMultiplier + 1} {
		_, err := NewServer(&Config{DataDir: t.TempDir(), RaftMultiplier: m})
		if !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("multiplier %d: err %v, want ErrInvalid", m, err)
		}
	}
}
