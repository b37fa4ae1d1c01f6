package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestDrainDeadlineCutsShutdownDelay: a node drain's deadline forces the
// allocations left on the node off it, as Nomad's does; a group
// shutdown_delay of an hour must not keep the task running past it. The
// allocation is a service with nowhere to move (one node), so it is
// still there at the deadline.
func TestDrainDeadlineCutsShutdownDelay(t *testing.T) {
	srv := servertest.NewServer(t)
	newDrainClient(t, srv, "node-a")
	ctx := context.Background()
	job := serviceJob("slow-stop")
	job.TaskGroups[0].ShutdownDelay = time.Hour
	if _, err := srv.JobRegister(ctx, job); err != nil {
		t.Fatal(err)
	}
	first := waitRunningAlloc(t, srv, job.ID, "")
	if _, err := srv.NodeUpdateDrain(ctx, &server.NodeDrainRequest{NodeID: first.NodeID, Enable: true, Deadline: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	waitAllocDone(t, srv, first.ID, 20*time.Second)
}

// TestDrainDeadlineCutsShutdownDelayOfMigrated: an allocation the drain
// migrated (its replacement runs on another node) is stopped with its
// shutdown_delay of an hour; the drain must not count itself done while
// that allocation still runs, and its deadline cuts the wait.
func TestDrainDeadlineCutsShutdownDelayOfMigrated(t *testing.T) {
	srv := servertest.NewServer(t)
	a := newDrainClient(t, srv, "node-a")
	ctx := context.Background()
	job := serviceJob("slow-move")
	job.TaskGroups[0].ShutdownDelay = time.Hour
	if _, err := srv.JobRegister(ctx, job); err != nil {
		t.Fatal(err)
	}
	first := waitRunningAlloc(t, srv, job.ID, "")
	if first.NodeID != a.Node().ID {
		t.Fatalf("allocation on %s, want node-a %s", first.NodeID, a.Node().ID)
	}
	newDrainClient(t, srv, "node-b")
	if _, err := srv.NodeUpdateDrain(ctx, &server.NodeDrainRequest{NodeID: first.NodeID, Enable: true, Deadline: 4 * time.Second}); err != nil {
		t.Fatal(err)
	}
	waitRunningAlloc(t, srv, job.ID, first.NodeID)
	waitAllocDone(t, srv, first.ID, 25*time.Second)
}

// waitRunningAlloc returns a running allocation of the job on a node other
// than notNode.
func waitRunningAlloc(t *testing.T, srv *server.Server, jobID, notNode string) *structs.Allocation {
	t.Helper()
	var got *structs.Allocation
	waittest.For(t, 30*time.Second, "allocation running", func() (bool, string) {
		allocs, _, err := srv.JobAllocations(context.Background(), jobID, nil)
		if err != nil {
			return false, err.Error()
		}
		for _, a := range allocs {
			if a.ClientStatus == structs.AllocClientStatusRunning && a.DesiredStatus == structs.AllocDesiredStatusRun && a.NodeID != notNode {
				got = a
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d allocations, none running off %q", len(allocs), notNode)
	})
	return got
}

// waitAllocDone waits for the allocation's tasks to have ended.
func waitAllocDone(t *testing.T, srv *server.Server, id string, within time.Duration) {
	t.Helper()
	waittest.For(t, within, "allocation stopped by the drain deadline, its shutdown_delay cut", func() (bool, string) {
		a, err := srv.State().AllocByID(nil, id)
		if err != nil || a == nil {
			return false, fmt.Sprint(err)
		}
		return a.ClientTerminalStatus(), fmt.Sprintf("desired %s (%s), client %s", a.DesiredStatus, a.DesiredDescription, a.ClientStatus)
	})
}
