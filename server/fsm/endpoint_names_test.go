package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestExploitEndpointNameCheckedAtApply: the server checked that no other
// live job declares a job's endpoint name under a leader-local mutex,
// before Raft, so two registrations sent to two leaders across an
// election could both pass the check and both land. The FSM refuses the
// second at apply, changing nothing, and a stopped job frees its name.
func TestExploitEndpointNameCheckedAtApply(t *testing.T) {
	tf := newTestFSM(t)
	a := endpointJob("llm-70b")
	a.ID, a.Name = "a", "a"
	if r := tf.applyMsg(t, 10, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: a}); r != nil {
		t.Fatalf("register a: %v", r)
	}
	before := tf.hash(t)
	b := endpointJob("llm-70b")
	b.ID, b.Name = "b", "b"
	r := tf.applyMsg(t, 11, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: b})
	err, ok := r.(error)
	if !ok || !errors.Is(err, structs.ErrEndpointConflict) || !strings.Contains(err.Error(), `already declared by live job "a"`) {
		t.Fatalf("register b with a's endpoint name = %v, want ErrEndpointConflict naming job a", r)
	}
	if tf.hash(t) != before {
		t.Fatal("a refused register changed the state")
	}
	// Another namespace may use the name.
	other := endpointJob("llm-70b")
	other.ID, other.Name, other.Namespace = "c", "c", "team"
	if r := tf.applyMsg(t, 12, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: other}); r != nil {
		t.Fatalf("register in another namespace: %v", r)
	}
	// Stopped, job a no longer holds the name.
	if r := tf.applyMsg(t, 13, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{JobID: a.ID}); r != nil {
		t.Fatalf("stop a: %v", r)
	}
	if r := tf.applyMsg(t, 14, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: b}); r != nil {
		t.Fatalf("register b after a stopped: %v", r)
	}
}
