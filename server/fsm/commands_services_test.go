package fsm

import (
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestApplyServiceRegistrations applies the three service registration
// messages and checks the state after each, that a finished allocation
// and a node gone down take their instances with them, and that a
// snapshot carries registrations.
func TestApplyServiceRegistrations(t *testing.T) {
	tf := newTestFSM(t)
	node := statetest.Node(0)
	job := statetest.BatchJob(2)
	a1, a2 := statetest.Alloc(job, node), statetest.Alloc(job, node)
	reg := func(a *structs.Allocation, name string, port int) *structs.ServiceRegistration {
		return &structs.ServiceRegistration{ID: structs.ServiceRegistrationID(a.ID, "g", name, "http"), ServiceName: name, Namespace: "default",
			NodeID: node.ID, JobID: job.ID, AllocID: a.ID, Address: "127.0.0.1", Port: port, Tags: []string{"v1"}}
	}
	count := func(name string) int {
		t.Helper()
		regs, err := tf.State().ServiceRegistrationsByName(nil, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		return len(regs)
	}
	var idx uint64
	apply := func(mt structs.MessageType, msg interface{}) {
		t.Helper()
		idx++
		if resp := tf.applyMsg(t, idx, mt, msg); resp != nil {
			t.Fatalf("%s: %v", mt, resp)
		}
	}
	apply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: node})
	apply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: statetest.Eval(job)})
	apply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a1, a2}, UpdatedAt: 1})

	other := reg(a1, "web", 20001)
	other.NodeID = "another-node"
	apply(structs.ServiceRegistrationUpsertRequestType, &structs.ServiceRegistrationUpsertRequest{Services: []*structs.ServiceRegistration{
		reg(a1, "web", 20001), reg(a2, "web", 20002), reg(a2, "admin", 20003)}})
	if count("web") != 2 || count("admin") != 1 {
		t.Fatalf("web %d admin %d after upsert", count("web"), count("admin"))
	}
	// A registration naming another node than its allocation's is dropped.
	apply(structs.ServiceRegistrationUpsertRequestType, &structs.ServiceRegistrationUpsertRequest{Services: []*structs.ServiceRegistration{other}})
	if r, _ := tf.State().ServiceRegistrationByID(nil, other.ID); r == nil || r.NodeID != node.ID {
		t.Fatalf("registration after a foreign-node upsert = %+v", r)
	}

	apply(structs.ServiceRegistrationDeleteByIDRequestType, &structs.ServiceRegistrationDeleteByIDRequest{Namespace: "default", IDs: []string{reg(a2, "admin", 0).ID}})
	if count("admin") != 0 {
		t.Fatal("admin still registered after delete by ID")
	}

	// Snapshot and restore keep the registrations.
	snap := snapshotBytes(t, tf.FSM)
	restored := newTestFSM(t)
	if err := restoreBytes(restored.FSM, snap); err != nil {
		t.Fatal(err)
	}
	if regs, _ := restored.State().ServiceRegistrations(nil); len(regs) != 2 {
		t.Fatalf("restored %d registrations, want 2", len(regs))
	}

	// a1 finishes: its instance goes with the client update.
	apply(structs.AllocClientUpdateRequestType, &structs.AllocClientUpdateRequest{Allocs: []*structs.Allocation{{ID: a1.ID, ClientStatus: structs.AllocClientStatusComplete}}, UpdatedAt: 2})
	if count("web") != 1 {
		t.Fatalf("web %d after a1 completed, want 1", count("web"))
	}
	apply(structs.ServiceRegistrationDeleteByAllocIDRequestType, &structs.ServiceRegistrationDeleteByAllocIDRequest{AllocIDs: []string{a2.ID}})
	if count("web") != 0 {
		t.Fatalf("web %d after delete by alloc", count("web"))
	}
	// A node gone down takes its instances.
	apply(structs.ServiceRegistrationUpsertRequestType, &structs.ServiceRegistrationUpsertRequest{Services: []*structs.ServiceRegistration{reg(a2, "web", 20002)}})
	apply(structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{NodeID: node.ID, Status: structs.NodeStatusDown, UpdatedAt: 3})
	if count("web") != 0 {
		t.Fatal("web still registered on a node that is down")
	}
	// A bad registration fails the entry and writes nothing.
	idx++
	bad := reg(a2, "bad name", 1)
	if resp := tf.applyMsg(t, idx, structs.ServiceRegistrationUpsertRequestType, &structs.ServiceRegistrationUpsertRequest{Services: []*structs.ServiceRegistration{bad}}); resp == nil {
		t.Fatal("invalid registration applied")
	}
}
