package agent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/client"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/structs"
)

func newDrainClient(t *testing.T, srv *server.Server, name string) *client.Client {
	t.Helper()
	c, err := client.NewClient(&client.Config{
		DataDir: taskUserDir(t), NodeName: name, Servers: srv, DevGPUs: 0,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}}), SyncInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	return c
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func serviceJob(id string) *structs.Job {
	job := &structs.Job{
		ID: id, Name: id, Type: structs.JobTypeService, Datacenters: []string{"dc1"}, Priority: 50,
		TaskGroups: []*structs.TaskGroup{{
			Name: "web", Count: 1,
			Tasks: []*structs.Task{{
				Name: "main", Driver: "native", KillTimeout: time.Second,
				Config:    map[string]interface{}{"command": "/bin/sh", "args": []interface{}{"-c", "exec sleep 300"}},
				Resources: &structs.Resources{CPU: 100, MemoryMB: 32},
			}},
		}},
	}
	job.Canonicalize()
	return job
}

func pollUntil(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, within, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDrainMovesServiceBeforeStopping is issue 5's "must show 4" (drain):
// a server and two client nodes in one process; draining the node that
// runs a service allocation places a replacement on the other node, and
// the old allocation is stopped only once the replacement runs.
func TestDrainMovesServiceBeforeStopping(t *testing.T) {
	srv := servertest.NewServer(t)
	c1 := newDrainClient(t, srv, "node-a")
	c2 := newDrainClient(t, srv, "node-b")
	ctx := context.Background()
	if _, err := srv.JobRegister(ctx, serviceJob("web")); err != nil {
		t.Fatal(err)
	}
	var old *structs.Allocation
	pollUntil(t, 20*time.Second, "service running", func() (bool, string) {
		allocs, _, _ := srv.JobAllocations(ctx, "web", nil)
		for _, a := range allocs {
			if a.ClientStatus == structs.AllocClientStatusRunning {
				old = a
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d allocs", len(allocs))
	})
	other := c2.Node().ID
	if old.NodeID == other {
		other = c1.Node().ID
	}
	if _, err := srv.NodeUpdateDrain(ctx, &server.NodeDrainRequest{NodeID: old.NodeID, Enable: true, Deadline: time.Minute}); err != nil {
		t.Fatal(err)
	}
	var repl *structs.Allocation
	pollUntil(t, 30*time.Second, "old allocation stopped after its replacement runs", func() (bool, string) {
		allocs, _, _ := srv.JobAllocations(ctx, "web", nil)
		var cur *structs.Allocation
		for _, a := range allocs {
			if a.ID == old.ID {
				cur = a
			} else if a.PreviousAllocation == old.ID {
				repl = a
			}
		}
		if cur == nil {
			return false, "old allocation gone"
		}
		if cur.DesiredStatus != structs.AllocDesiredStatusRun {
			// The moment it is told to stop, its replacement must run.
			if repl == nil || repl.ClientStatus != structs.AllocClientStatusRunning {
				t.Fatalf("old allocation told to stop (%q) before its replacement ran: %+v", cur.DesiredDescription, repl)
			}
			return cur.ClientTerminalStatus(), "old allocation still " + cur.ClientStatus
		}
		return false, "old allocation desired " + cur.DesiredStatus
	})
	if repl.NodeID != other {
		t.Fatalf("replacement on node %s, want the other node %s", repl.NodeID, other)
	}
	a, _, err := srv.AllocGet(ctx, old.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldTask, newTask := a.TaskStates["main"], repl.TaskStates["main"]
	if newTask.StartedAt == 0 || oldTask.FinishedAt == 0 || newTask.StartedAt > oldTask.FinishedAt {
		t.Fatalf("replacement started at %d, old task finished at %d: want the replacement first", newTask.StartedAt, oldTask.FinishedAt)
	}
	pollUntil(t, 10*time.Second, "drain complete", func() (bool, string) {
		n, _, _ := srv.NodeGet(ctx, old.NodeID, nil)
		return n.DrainStrategy == nil && n.SchedulingEligibility == structs.NodeSchedulingIneligible, fmt.Sprintf("drain %+v eligibility %s", n.DrainStrategy, n.SchedulingEligibility)
	})
	// Eligibility: bad values are refused; the drained node can take work
	// again once marked eligible.
	if _, err := srv.NodeUpdateEligibility(ctx, old.NodeID, "maybe"); err == nil {
		t.Fatal("eligibility \"maybe\" accepted")
	}
	if _, err := srv.NodeUpdateEligibility(ctx, old.NodeID, structs.NodeSchedulingEligible); err != nil {
		t.Fatal(err)
	}

	// alloc stop: the allocation is stopped and the scheduler replaces it.
	if _, _, err := srv.AllocStop(ctx, repl.ID); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 20*time.Second, "stopped allocation replaced", func() (bool, string) {
		allocs, _, _ := srv.JobAllocations(ctx, "web", nil)
		for _, a := range allocs {
			if a.ID != repl.ID && a.ID != old.ID && a.ClientStatus == structs.AllocClientStatusRunning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d allocs", len(allocs))
	})
	if _, _, err := srv.AllocStop(ctx, "no-such-alloc"); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("stop unknown allocation: %v", err)
	}
	if _, err := srv.NodeUpdateDrain(ctx, &server.NodeDrainRequest{NodeID: "no-such-node", Enable: true}); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("drain unknown node: %v", err)
	}
}

// TestDrainDeadlineStopsBatch checks that a batch allocation runs on a
// draining node until the deadline and is then stopped and placed again
// on another node.
func TestDrainDeadlineStopsBatch(t *testing.T) {
	srv := servertest.NewServer(t)
	newDrainClient(t, srv, "node-a")
	newDrainClient(t, srv, "node-b")
	ctx := context.Background()
	job := serviceJob("train")
	job.Type = structs.JobTypeBatch
	job.TaskGroups[0].RestartPolicy = &structs.RestartPolicy{Attempts: 0, Interval: time.Minute, Delay: time.Second, Mode: structs.RestartModeFail}
	if _, err := srv.JobRegister(ctx, job); err != nil {
		t.Fatal(err)
	}
	var first *structs.Allocation
	pollUntil(t, 20*time.Second, "batch running", func() (bool, string) {
		allocs, _, _ := srv.JobAllocations(ctx, "train", nil)
		for _, a := range allocs {
			if a.ClientStatus == structs.AllocClientStatusRunning {
				first = a
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d allocs", len(allocs))
	})
	start := time.Now()
	if _, err := srv.NodeUpdateDrain(ctx, &server.NodeDrainRequest{NodeID: first.NodeID, Enable: true, Deadline: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 30*time.Second, "batch stopped at the deadline and placed elsewhere", func() (bool, string) {
		allocs, _, _ := srv.JobAllocations(ctx, "train", nil)
		var stopped, moved bool
		for _, a := range allocs {
			if a.ID == first.ID && a.DesiredStatus == structs.AllocDesiredStatusStop {
				if time.Since(start) < 1400*time.Millisecond {
					t.Fatalf("batch allocation stopped %s into the drain, before its deadline", time.Since(start))
				}
				stopped = true
			}
			if a.ID != first.ID && a.NodeID != first.NodeID && a.ClientStatus == structs.AllocClientStatusRunning {
				moved = true
			}
		}
		return stopped && moved, fmt.Sprintf("stopped %v moved %v", stopped, moved)
	})
}
