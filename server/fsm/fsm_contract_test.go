package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/raft"
)

// contractLog returns a small cluster's log as encoded entries (index 1..n):
// a node, a batch job with its evaluation, three allocations placed, and
// one client update that completes all three.
func contractLog(t *testing.T) (entries [][]byte, allocIDs []string) {
	t.Helper()
	node := statetest.Node(4)
	job := statetest.BatchJob(1)
	eval := statetest.Eval(job)
	var allocs []*structs.Allocation
	for i := 0; i < 3; i++ {
		a := statetest.Alloc(job, node)
		a.Name = job.ID + ".main[" + string(rune('0'+i)) + "]"
		a.EvalID = eval.ID
		// Each allocation holds its own GPU.
		a.AllocatedResources.Tasks[job.TaskGroups[0].Tasks[0].Name].Devices[0].DeviceIDs = []string{node.NodeResources.Devices[0].Instances[i].ID}
		allocs = append(allocs, a)
		allocIDs = append(allocIDs, a.ID)
	}
	var done []*structs.Allocation
	for _, id := range allocIDs {
		done = append(done, &structs.Allocation{ID: id, ClientStatus: structs.AllocClientStatusComplete, ClientDescription: "ran"})
	}
	msgs := []struct {
		mt  structs.MessageType
		msg interface{}
	}{
		{structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: node}},
		{structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: eval}},
		{structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{AllocsPlaced: allocs, EvalID: eval.ID, UpdatedAt: 100}},
		{structs.AllocClientUpdateRequestType, &structs.AllocClientUpdateRequest{Allocs: done, UpdatedAt: 200}},
	}
	for _, m := range msgs {
		buf, err := structs.Encode(m.mt, m.msg)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, buf)
	}
	return entries, allocIDs
}

func applyAll(t *testing.T, tf *testFSM, entries [][]byte) {
	t.Helper()
	for i, e := range entries {
		if resp := tf.RaftFSM().Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: e}); resp != nil {
			t.Fatalf("entry %d: %v", i+1, resp)
		}
	}
}

// TestFSMSameLogSameStateAtDifferentTimes applies one log to two fresh FSMs
// at different wall-clock times: the states must hash the same (no clock
// or random source inside an apply; a time.Now in JobRegister fails it).
func TestFSMSameLogSameStateAtDifferentTimes(t *testing.T) {
	entries, _ := contractLog(t)
	a := newTestFSM(t)
	applyAll(t, a, entries)
	time.Sleep(3 * time.Millisecond) // the clock moves on between the two
	b := newTestFSM(t)
	applyAll(t, b, entries)
	if ha, hb := a.hash(t), b.hash(t); ha != hb {
		t.Fatalf("the same log gave two states: %s != %s (an apply reads a clock or random source)", ha, hb)
	}
	// Restoring a's snapshot gives the same state as well.
	c := newTestFSM(t)
	if err := restoreBytes(c.FSM, snapshotBytes(t, a.FSM)); err != nil {
		t.Fatal(err)
	}
	if c.hash(t) != a.hash(t) {
		t.Fatal("a restored snapshot differs from the state it was taken of")
	}
}

// TestFSMClientUpdateAppliesEveryAlloc: one client update naming several
// allocations updates each of them (an FSM that drops the last fails it).
func TestFSMClientUpdateAppliesEveryAlloc(t *testing.T) {
	entries, ids := contractLog(t)
	tf := newTestFSM(t)
	applyAll(t, tf, entries)
	for _, id := range ids {
		a, err := tf.State().AllocByID(nil, id)
		if err != nil || a == nil {
			t.Fatalf("alloc %s: %v %v", id, a, err)
		}
		if a.ClientStatus != structs.AllocClientStatusComplete || a.ModifyIndex != 4 || a.ModifyTime != 200 {
			t.Fatalf("alloc %s not updated by the client update: status %q modify index %d time %d", id, a.ClientStatus, a.ModifyIndex, a.ModifyTime)
		}
	}
}

// TestExploitFSMHaltsOnCorruptEntry: an entry that does not decode, or an
// unknown type without the ignore flag, halts the FSM; later entries are
// not applied (a server that skipped the entry would serve a state short of
// its peers'), snapshots fail, and the error names the index.
func TestExploitFSMHaltsOnCorruptEntry(t *testing.T) {
	for _, bad := range []struct {
		name string
		data []byte
		want error
	}{
		{"undecodable", []byte{byte(structs.JobRegisterRequestType), 0xc1, 0xff}, structs.ErrDecode},
		{"unknown type", []byte{77, 0x80}, ErrUnknownMessageType},
		{"empty", nil, ErrEmptyMessage},
	} {
		t.Run(bad.name, func(t *testing.T) {
			entries, ids := contractLog(t)
			var halted error
			tf := newTestFSM(t)
			tf.onHalt = func(err error) { halted = err }
			applyAll(t, tf, entries[:3])
			resp := tf.RaftFSM().Apply(&raft.Log{Index: 4, Term: 1, Type: raft.LogCommand, Data: bad.data})
			err, _ := resp.(error)
			if !errors.Is(err, ErrHalted) || !errors.Is(err, bad.want) || !strings.Contains(err.Error(), "raft index 4") {
				t.Fatalf("apply of a corrupt entry = %v, want ErrHalted and %v naming index 4", resp, bad.want)
			}
			if halted == nil || tf.Halted() == nil {
				t.Fatalf("OnHalt %v, Halted %v: the FSM did not halt", halted, tf.Halted())
			}
			// The next, valid entry (the client update) must not apply.
			before := tf.hash(t)
			if resp := tf.RaftFSM().Apply(&raft.Log{Index: 5, Term: 1, Type: raft.LogCommand, Data: entries[3]}); !errors.Is(resp.(error), ErrHalted) {
				t.Fatalf("apply after the halt = %v, want ErrHalted", resp)
			}
			if tf.hash(t) != before {
				t.Fatal("a halted FSM changed its state")
			}
			a, _ := tf.State().AllocByID(nil, ids[0])
			if a.ClientStatus == structs.AllocClientStatusComplete {
				t.Fatal("a halted FSM applied a later entry")
			}
			if _, err := tf.RaftFSM().Snapshot(); !errors.Is(err, ErrHalted) {
				t.Fatalf("snapshot of a halted FSM: %v, want ErrHalted", err)
			}
		})
	}
}

// TestExploitNodeStatusUpdatedAtIsNanoseconds: every message's UpdatedAt is
// Unix nanoseconds; a node's StatusUpdatedAt holds it in seconds. A value an
// older version wrote in seconds still reads as seconds.
func TestExploitNodeStatusUpdatedAtIsNanoseconds(t *testing.T) {
	tf := newTestFSM(t)
	node := statetest.Node(0)
	tf.applyMsg(t, 1, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: node})
	at := time.Unix(1_700_000_000, 123_456_789)
	if resp := tf.applyMsg(t, 2, structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{NodeID: node.ID, Status: structs.NodeStatusDown, UpdatedAt: at.UnixNano()}); resp != nil {
		t.Fatal(resp)
	}
	n, _ := tf.State().NodeByID(nil, node.ID)
	if n.StatusUpdatedAt != at.Unix() {
		t.Fatalf("StatusUpdatedAt = %d from UpdatedAt %d ns, want %d (Unix seconds)", n.StatusUpdatedAt, at.UnixNano(), at.Unix())
	}
	if resp := tf.applyMsg(t, 3, structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{NodeID: node.ID, Status: structs.NodeStatusReady, UpdatedAt: 1_700_000_100}); resp != nil {
		t.Fatal(resp)
	}
	if n, _ := tf.State().NodeByID(nil, node.ID); n.StatusUpdatedAt != 1_700_000_100 {
		t.Fatalf("a legacy seconds UpdatedAt gave StatusUpdatedAt %d", n.StatusUpdatedAt)
	}
}
