package server_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestAuthorizeNodeOnLaggingFollower: a node's first request after the
// leader acknowledged its registration may reach a follower that has not
// applied it yet. The follower waits for it instead of refusing the
// node's secret (which, in a loaded make test, failed a task's first
// artifact fetch with 403); a wrong secret is still refused, after the
// bounded wait, and the leader refuses at once.
func TestAuthorizeNodeOnLaggingFollower(t *testing.T) {
	c := servertest.NewCluster(t, 3)
	leader := c.WaitForLeader()
	f := c.Follower()
	c.Partition(f)
	n := registerNode(t, c.Server(leader), 0)
	if err := c.Server(f).AuthorizeNode(n.ID, n.SecretID); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("partitioned follower: %v, want not found (it cannot have the registration)", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Server(f).AuthorizeNode(n.ID, n.SecretID) }()
	// The registration reaches the follower only once it is healed, while
	// the check above waits.
	time.Sleep(100 * time.Millisecond)
	c.Heal()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("follower after it caught up: %v, want the secret accepted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AuthorizeNode on the follower did not return")
	}

	start := time.Now()
	if err := c.Server(f).AuthorizeNode(n.ID, "wrong-secret"); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("wrong secret on the follower: %v, want permission denied", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("wrong secret refused after %s: the wait is not bounded", waited)
	}
	start = time.Now()
	if err := c.Server(c.WaitForLeader()).AuthorizeNode(n.ID, "wrong-secret"); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("wrong secret on the leader: %v, want permission denied", err)
	}
	if waited := time.Since(start); waited > 500*time.Millisecond {
		t.Errorf("the leader waited %s before refusing; it holds every committed entry", waited)
	}
}
