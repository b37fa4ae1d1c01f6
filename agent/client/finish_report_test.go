package client

import (
	"os/user"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/native"
	"github.com/gpulayer/gpulayer/structs"
)

// heldDestroy is the native driver with DestroyTask held until release
// closes; destroying tells each call as it starts.
type heldDestroy struct {
	*native.Driver
	destroying chan string
	release    chan struct{}
}

// newHeldDestroy returns a heldDestroy running tasks as the test's user.
func newHeldDestroy(t *testing.T) *heldDestroy {
	t.Helper()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return &heldDestroy{
		Driver:     native.NewWithConfig(native.Config{Logger: testLogger(t), Users: native.UserPolicy{DefaultUser: me.Username}}),
		destroying: make(chan string, 1),
		release:    make(chan struct{}),
	}
}

func (d *heldDestroy) DestroyTask(id string) error {
	d.destroying <- id
	<-d.release
	return d.Driver.DestroyTask(id)
}

// TestExitReportedBeforeDriverDestroy: a batch task that exits is reported
// complete while its driver task is still being destroyed (the native
// shim's exit file fsync, a container's removal), in one update: no
// "uploading" update of its own comes first when the task wrote no
// outputs. The local record of the finished allocation waits for the
// destroy.
func TestExitReportedBeforeDriverDestroy(t *testing.T) {
	drv := newHeldDestroy(t)
	released := false
	release := func() {
		if !released {
			released = true
			close(drv.release)
		}
	}
	t.Cleanup(release)
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", func(cfg *Config) { cfg.Drivers = []driver.Driver{drv} })
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeBatch, "/bin/true", nil, nil)
	srv.UpsertAlloc(a)

	select {
	case id := <-drv.destroying:
		if want := a.ID + "/main"; id != want {
			t.Fatalf("destroying %q, want %q", id, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the driver task was never destroyed")
	}
	got := srv.WaitForAlloc(t, a.ID, 30*time.Second, func(al *structs.Allocation) bool {
		return al.ClientStatus == structs.AllocClientStatusComplete
	})
	ts := got.TaskStates["main"]
	if ts == nil || ts.State != structs.TaskStateDead || ts.Failed || eventTime(got, structs.TaskEventTerminated) == 0 {
		t.Fatalf("complete without the task's end: %+v", ts)
	}
	hist := srv.UpdateHistory(a.ID)
	if slices.ContainsFunc(hist, func(h string) bool { return strings.Contains(h, "uploading") }) {
		t.Fatalf("an uploading update came first though the task wrote no outputs: %q", hist)
	}
	if rec, err := c.state.terminal(); err != nil || rec[a.ID] != nil {
		t.Fatalf("finished record written before the destroy returned: %+v, %v", rec[a.ID], err)
	}

	release()
	waitRecord(t, c, a.ID, func(r *allocRecord) bool { return r != nil && r.ClientStatus == structs.AllocClientStatusComplete })
	// One more update, the log archive's; the finished record itself is
	// not reported again.
	srv.WaitForAlloc(t, a.ID, 30*time.Second, func(al *structs.Allocation) bool { return al.LogArchive != "" })
	if after := srv.UpdateHistory(a.ID); len(after) != len(hist)+1 {
		t.Fatalf("updates after the destroy: %q, want one more than %q (the log archive's)", after, hist)
	}
}

// TestFirstUpdateCarriesReceivedAndSetup: the client's first update of a
// new allocation is sent once the task's directory is built, with both the
// Received and the Task Setup events, not one update for each.
func TestFirstUpdateCarriesReceivedAndSetup(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeBatch, "/bin/true", nil, nil)
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 30*time.Second, func(al *structs.Allocation) bool {
		return al.ClientStatus == structs.AllocClientStatusComplete
	})
	ups := srv.Updates(a.ID)
	if len(ups) == 0 || ups[0].TaskStates["main"] == nil {
		t.Fatalf("no first update with the task's state: %+v", ups)
	}
	var types []string
	for _, e := range ups[0].TaskStates["main"].Events {
		types = append(types, e.Type)
	}
	if !slices.Contains(types, structs.TaskEventReceived) || !slices.Contains(types, structs.TaskEventSetup) {
		t.Fatalf("first update's events %q, want %q and %q", types, structs.TaskEventReceived, structs.TaskEventSetup)
	}
}
