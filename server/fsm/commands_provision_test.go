package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

func provisionReq(id string) *structs.ProvisionRequest {
	return &structs.ProvisionRequest{ID: id, Pool: "gpu", Op: structs.ProvisionOpCreate, IdempotencyKey: id,
		Status: structs.ProvisionStatusPending, Reason: "test", CreateTime: 10, ModifyTime: 10}
}

// TestProvisionResultCompareAndSet applies a provider answer only while
// the request is unchanged: an answer read at an older ModifyIndex is
// dropped, counted, and answered Applied false.
func TestProvisionResultCompareAndSet(t *testing.T) {
	tf := newTestFSM(t)
	if resp := tf.applyMsg(t, 5, structs.ProvisionRequestUpsertRequestType,
		&structs.ProvisionRequestUpsertRequest{Requests: []*structs.ProvisionRequest{provisionReq("a"), provisionReq("b")}}); resp != nil {
		t.Fatal(resp)
	}
	// The first answer, read at index 5: applied.
	resp := tf.applyMsg(t, 6, structs.ProvisionResultRequestType, &structs.ProvisionResultRequest{
		ID: "a", ExpectedIndex: 5, Status: structs.ProvisionStatusFailed, Error: "boom", Attempts: 1, NextAttempt: 99, UpdatedAt: 20})
	if r, ok := resp.(*structs.ProvisionResultResponse); !ok || !r.Applied {
		t.Fatalf("first answer: %v", resp)
	}
	// A duplicate of the same answer (read at 5, the request is at 6 now):
	// dropped, the state untouched.
	before := tf.hash(t)
	resp = tf.applyMsg(t, 7, structs.ProvisionResultRequestType, &structs.ProvisionResultRequest{
		ID: "a", ExpectedIndex: 5, Status: structs.ProvisionStatusComplete, HostID: "h1", Attempts: 1, UpdatedAt: 30})
	if r, ok := resp.(*structs.ProvisionResultResponse); !ok || r.Applied {
		t.Fatalf("stale answer: %v", resp)
	}
	if tf.hash(t) != before {
		t.Fatal("a stale answer changed the state")
	}
	if tf.StaleProvisionResults() != 1 {
		t.Fatalf("stale count = %d", tf.StaleProvisionResults())
	}
	got, _ := tf.State().ProvisionRequestByID(nil, "a")
	if got.Status != structs.ProvisionStatusFailed || got.Error != "boom" || got.ModifyIndex != 6 || got.CreateIndex != 5 || got.NextAttempt != 99 || got.ModifyTime != 20 {
		t.Fatalf("request = %+v", got)
	}
	// An answer for a request that is gone: dropped too.
	if r, _ := tf.applyMsg(t, 8, structs.ProvisionResultRequestType, &structs.ProvisionResultRequest{ID: "zz", ExpectedIndex: 1, Status: structs.ProvisionStatusComplete}).(*structs.ProvisionResultResponse); r == nil || r.Applied {
		t.Fatal("answer for an unknown request applied")
	}
	// Delete (GC) removes; unknown IDs are skipped.
	if resp := tf.applyMsg(t, 9, structs.ProvisionRequestDeleteRequestType, &structs.ProvisionRequestDeleteRequest{IDs: []string{"a", "nope"}}); resp != nil {
		t.Fatal(resp)
	}
	all, _ := tf.State().ProvisionRequests(nil)
	if len(all) != 1 || all[0].ID != "b" {
		t.Fatalf("after delete: %v", all)
	}
	// Round trip through a snapshot (record type 15).
	dst := newTestFSM(t)
	if err := restoreBytes(dst.FSM, snapshotBytes(t, tf.FSM)); err != nil {
		t.Fatal(err)
	}
	if dst.hash(t) != tf.hash(t) {
		t.Fatal("restored provision state differs")
	}
}

// TestProvisionUpsertRejectsBadInput: an invalid request in an entry
// writes none of it, and the error names the field.
func TestProvisionUpsertRejectsBadInput(t *testing.T) {
	bad := provisionReq("x")
	bad.Op = "explode"
	long := provisionReq("y")
	long.Reason = string(make([]byte, structs.MaxProvisionReasonLen+1))
	term := provisionReq("z")
	term.Op = structs.ProvisionOpTerminate
	cases := map[string]*structs.ProvisionRequest{"Op": bad, "Reason": long, "HostID": term, "Status": {ID: "s", Pool: "p", Op: "create", Status: "odd"}}
	for field, r := range cases {
		t.Run(field, func(t *testing.T) {
			tf := newTestFSM(t)
			before := tf.hash(t)
			resp := tf.applyMsg(t, 3, structs.ProvisionRequestUpsertRequestType,
				&structs.ProvisionRequestUpsertRequest{Requests: []*structs.ProvisionRequest{provisionReq("ok"), r}})
			err, _ := resp.(error)
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("resp = %v", resp)
			}
			if !strings.Contains(err.Error(), field) {
				t.Fatalf("error %q does not name %s", err, field)
			}
			if tf.hash(t) != before {
				t.Fatal("a refused entry changed the state")
			}
		})
	}
	tf := newTestFSM(t)
	many := make([]*structs.ProvisionRequest, structs.MaxProvisionRequestsPerEntry+1)
	for i := range many {
		many[i] = provisionReq(structs.GenerateUUID())
	}
	if err, _ := tf.applyMsg(t, 3, structs.ProvisionRequestUpsertRequestType, &structs.ProvisionRequestUpsertRequest{Requests: many}).(error); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("too many requests: %v", err)
	}
}
