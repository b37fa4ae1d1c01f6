package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
)

// TestDrainerWakesOnNodeWrite: with no node draining, the leader's drainer
// sleeps on the nodes table instead of listing every node each interval;
// a drain started later (a node write) is still seen and stepped: a node
// with nothing on it ends its drain, twice in a row.
func TestDrainerWakesOnNodeWrite(t *testing.T) {
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
		c.MinHeartbeatTTL = 10 * time.Minute // the test sends no heartbeats
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := statetest.Node(1)
	if _, err := s.NodeRegister(ctx, n); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		// Let the drainer find nothing to do and go to sleep.
		time.Sleep(600 * time.Millisecond)
		if _, err := s.NodeUpdateDrain(ctx, &server.NodeDrainRequest{NodeID: n.ID, Enable: true, KeepIneligible: true}); err != nil {
			t.Fatal(err)
		}
		waittest.NoErr(t, 10*time.Second, "the empty node's drain ends", func() (bool, error) {
			got, err := s.State().NodeByID(nil, n.ID)
			return err == nil && got != nil && got.DrainStrategy == nil, err
		})
	}
}
