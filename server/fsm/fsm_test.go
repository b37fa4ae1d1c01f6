package fsm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/raft"
)

// TestApplyEachMessageType applies one entry of each type in a realistic
// order and checks the state after each.
func TestApplyEachMessageType(t *testing.T) {
	tf := newTestFSM(t)
	node := statetest.Node(2)
	job := statetest.BatchJob(1)
	eval := statetest.Eval(job)
	alloc := statetest.Alloc(job, node)
	alloc.EvalID = eval.ID
	// Job versions and deployments.
	dep := &structs.Deployment{ID: structs.GenerateUUID(), JobID: job.ID, Status: structs.DeploymentStatusRunning,
		TaskGroups: map[string]*structs.DeploymentState{"web": {DesiredTotal: 1, ProgressDeadline: 60e9}}}
	depAlloc := statetest.Alloc(job, node)
	depAlloc.DeploymentID = dep.ID

	steps := []struct {
		name      string
		mt        structs.MessageType
		msg       interface{}
		wantErr   error
		wantFreed bool
		check     func(t *testing.T)
	}{
		{
			name: "node register", mt: structs.NodeRegisterRequestType,
			msg: &structs.NodeRegisterRequest{Node: node}, wantFreed: true,
			check: func(t *testing.T) {
				n, _ := tf.State().NodeByID(nil, node.ID)
				if n == nil || n.CreateIndex != 1 || len(n.NodeResources.Devices[0].Instances) != 2 {
					t.Fatalf("node = %+v", n)
				}
			},
		},
		{
			name: "job register", mt: structs.JobRegisterRequestType,
			msg: &structs.JobRegisterRequest{Job: job, Eval: eval},
			check: func(t *testing.T) {
				j, _ := tf.State().JobByID(nil, job.ID)
				e, _ := tf.State().EvalByID(nil, eval.ID)
				if j == nil || j.Status != structs.JobStatusPending || e == nil || e.CreateIndex != 2 {
					t.Fatalf("job %+v eval %+v", j, e)
				}
			},
		},
		{
			name: "plan results", mt: structs.ApplyPlanResultsRequestType,
			msg: &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{alloc}, EvalID: eval.ID, UpdatedAt: 10},
			check: func(t *testing.T) {
				a, _ := tf.State().AllocByID(nil, alloc.ID)
				j, _ := tf.State().JobByID(nil, job.ID)
				if a == nil || a.AllocModifyIndex != 3 || len(a.DeviceIDs()) != 1 || j.Status != structs.JobStatusRunning {
					t.Fatalf("alloc %+v job status %s", a, j.Status)
				}
			},
		},
		{
			name: "eval update", mt: structs.EvalUpdateRequestType,
			msg: &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{func() *structs.Evaluation {
				e := eval.Copy()
				e.Status = structs.EvalStatusComplete
				return e
			}()}},
			check: func(t *testing.T) {
				e, _ := tf.State().EvalByID(nil, eval.ID)
				if e.Status != structs.EvalStatusComplete || e.ModifyIndex != 4 || e.CreateIndex != 2 {
					t.Fatalf("eval = %+v", e)
				}
			},
		},
		{
			name: "alloc client update running", mt: structs.AllocClientUpdateRequestType,
			msg: &structs.AllocClientUpdateRequest{Allocs: []*structs.Allocation{{ID: alloc.ID, ClientStatus: structs.AllocClientStatusRunning}}, UpdatedAt: 20},
			check: func(t *testing.T) {
				a, _ := tf.State().AllocByID(nil, alloc.ID)
				if a.ClientStatus != structs.AllocClientStatusRunning || a.ModifyTime != 20 {
					t.Fatalf("alloc = %+v", a)
				}
			},
		},
		{
			name: "alloc client update complete frees capacity", mt: structs.AllocClientUpdateRequestType,
			msg: &structs.AllocClientUpdateRequest{
				Allocs:    []*structs.Allocation{{ID: alloc.ID, ClientStatus: structs.AllocClientStatusComplete}},
				Evals:     []*structs.Evaluation{statetest.Eval(job)},
				UpdatedAt: 30,
			},
			wantFreed: true,
			check: func(t *testing.T) {
				evals, _ := tf.State().EvalsByJob(nil, job.ID)
				if len(evals) != 2 {
					t.Fatalf("evals = %d, want 2", len(evals))
				}
			},
		},
		{
			name: "node down", mt: structs.NodeUpdateStatusRequestType,
			msg: &structs.NodeUpdateStatusRequest{NodeID: node.ID, Status: structs.NodeStatusDown, UpdatedAt: 40},
			check: func(t *testing.T) {
				n, _ := tf.State().NodeByID(nil, node.ID)
				if n.Status != structs.NodeStatusDown || n.StatusUpdatedAt != 40 {
					t.Fatalf("node = %+v", n)
				}
			},
		},
		{
			name: "node ready again frees capacity", mt: structs.NodeUpdateStatusRequestType,
			msg:       &structs.NodeUpdateStatusRequest{NodeID: node.ID, Status: structs.NodeStatusReady, UpdatedAt: 50},
			wantFreed: true,
		},
		{
			name: "node heartbeat while ready frees nothing", mt: structs.NodeUpdateStatusRequestType,
			msg: &structs.NodeUpdateStatusRequest{NodeID: node.ID, Status: structs.NodeStatusReady, UpdatedAt: 60},
		},
		{
			name: "job stop", mt: structs.JobDeregisterRequestType,
			msg: &structs.JobDeregisterRequest{JobID: job.ID, Eval: statetest.Eval(job)},
			check: func(t *testing.T) {
				j, _ := tf.State().JobByID(nil, job.ID)
				if j == nil || !j.Stop || j.Status != structs.JobStatusDead || j.Version != 1 {
					t.Fatalf("job = %+v", j)
				}
			},
		},
		{
			name: "deregister missing job", mt: structs.JobDeregisterRequestType,
			msg:     &structs.JobDeregisterRequest{JobID: "missing", Eval: statetest.Eval(job)},
			wantErr: structs.ErrNotFound,
		},
		{
			name: "job purge", mt: structs.JobDeregisterRequestType,
			msg: &structs.JobDeregisterRequest{JobID: job.ID, Purge: true, Eval: statetest.Eval(job)}, wantFreed: true,
			check: func(t *testing.T) {
				j, _ := tf.State().JobByID(nil, job.ID)
				evals, _ := tf.State().EvalsByJob(nil, job.ID)
				if j != nil || len(evals) != 4 {
					t.Fatalf("job %v, %d evals", j, len(evals))
				}
			},
		},
		{
			name: "eval delete", mt: structs.EvalDeleteRequestType,
			msg: &structs.EvalDeleteRequest{Evals: []string{eval.ID}, Allocs: []string{alloc.ID}},
			check: func(t *testing.T) {
				e, _ := tf.State().EvalByID(nil, eval.ID)
				a, _ := tf.State().AllocByID(nil, alloc.ID)
				if e != nil || a != nil {
					t.Fatalf("eval %v alloc %v still there", e, a)
				}
			},
		},
		{
			name: "node secret rotate", mt: structs.NodeSecretRotateRequestType,
			msg: &structs.NodeSecretRotateRequest{NodeID: node.ID, SecretID: "new-secret"},
			check: func(t *testing.T) {
				if n, _ := tf.State().NodeByID(nil, node.ID); n == nil || n.SecretID != "new-secret" {
					t.Fatalf("node after rotate = %+v", n)
				}
			},
		},
		{
			name: "artifact upsert", mt: structs.ArtifactUpsertRequestType,
			msg: &structs.ArtifactUpsertRequest{Artifacts: []*structs.Artifact{{Digest: strings.Repeat("ab", 32), Size: 3, CreateTime: 5, JobRefs: []string{"default/j"}}}},
			check: func(t *testing.T) {
				if a, _ := tf.State().ArtifactByDigest(nil, strings.Repeat("ab", 32)); a == nil || a.Size != 3 || a.ModifyTime != 5 || len(a.JobRefs) != 1 {
					t.Fatalf("artifact after upsert = %+v", a)
				}
			},
		},
		{
			name: "artifact delete", mt: structs.ArtifactDeleteRequestType,
			msg: &structs.ArtifactDeleteRequest{Artifacts: []*structs.ArtifactDelete{{Digest: strings.Repeat("ab", 32), ModifyIndex: 0}}},
			check: func(t *testing.T) {
				// ModifyIndex 0 does not match the stored one: kept.
				if a, _ := tf.State().ArtifactByDigest(nil, strings.Repeat("ab", 32)); a == nil {
					t.Fatal("artifact deleted despite a stale ModifyIndex")
				}
			},
		},
		{
			name: "node deregister", mt: structs.NodeDeregisterRequestType,
			msg: &structs.NodeDeregisterRequest{NodeID: node.ID},
			check: func(t *testing.T) {
				if n, _ := tf.State().NodeByID(nil, node.ID); n != nil {
					t.Fatal("node still there")
				}
			},
		},
		{
			name: "node deregister missing", mt: structs.NodeDeregisterRequestType,
			msg: &structs.NodeDeregisterRequest{NodeID: node.ID}, wantErr: structs.ErrNotFound,
		},
		// Job versions and deployments.
		{
			name: "job register after the purge", mt: structs.JobRegisterRequestType,
			msg: &structs.JobRegisterRequest{Job: job},
		},
		{
			name: "job stability", mt: structs.JobStabilityRequestType,
			msg: &structs.JobStabilityRequest{JobID: job.ID, JobVersion: 0, Stable: true},
			check: func(t *testing.T) {
				j, _ := tf.State().JobByID(nil, job.ID)
				v, _ := tf.State().JobByIDAndVersion(nil, job.ID, 0)
				if j == nil || !j.Stable || v == nil || !v.Stable {
					t.Fatalf("job %+v version %+v", j, v)
				}
			},
		},
		{
			name: "job stability of an unknown version", mt: structs.JobStabilityRequestType,
			msg: &structs.JobStabilityRequest{JobID: job.ID, JobVersion: 7, Stable: true}, wantErr: structs.ErrNotFound,
		},
		{
			name: "plan results with a deployment", mt: structs.ApplyPlanResultsRequestType,
			msg: &structs.ApplyPlanResultsRequest{Deployment: dep, AllocsPlaced: []*structs.Allocation{depAlloc}, UpdatedAt: 100},
			check: func(t *testing.T) {
				d, _ := tf.State().DeploymentByID(nil, dep.ID)
				if d == nil || d.TaskGroups["web"].PlacedAllocs != 1 || d.TaskGroups["web"].RequireProgressBy != 100+60e9 {
					t.Fatalf("deployment = %+v", d)
				}
			},
		},
		{
			name: "deployment alloc health", mt: structs.DeploymentAllocHealthRequestType,
			msg: &structs.DeploymentAllocHealthRequest{DeploymentID: dep.ID, HealthyAllocationIDs: []string{depAlloc.ID}, Timestamp: 200},
			check: func(t *testing.T) {
				d, _ := tf.State().DeploymentByID(nil, dep.ID)
				a, _ := tf.State().AllocByID(nil, depAlloc.ID)
				if d.TaskGroups["web"].HealthyAllocs != 1 || !a.DeploymentStatus.IsHealthy() || a.DeploymentStatus.Timestamp != 200 {
					t.Fatalf("deployment %+v alloc %+v", d.TaskGroups["web"], a.DeploymentStatus)
				}
			},
		},
		{
			name: "deployment alloc health of an unknown allocation", mt: structs.DeploymentAllocHealthRequestType,
			msg: &structs.DeploymentAllocHealthRequest{DeploymentID: dep.ID, HealthyAllocationIDs: []string{alloc.ID}}, wantErr: structs.ErrNotFound,
		},
		{
			name: "deployment promote without canaries", mt: structs.DeploymentPromoteRequestType,
			msg: &structs.DeploymentPromoteRequest{DeploymentID: dep.ID, All: true}, wantErr: structs.ErrInvalid,
		},
		{
			name: "deployment status successful", mt: structs.DeploymentStatusUpdateRequestType,
			msg: &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: dep.ID,
				Status: structs.DeploymentStatusSuccessful, StatusDescription: structs.DeploymentStatusDescriptionSuccessful}, UpdatedAt: 300},
			check: func(t *testing.T) {
				d, _ := tf.State().DeploymentByID(nil, dep.ID)
				if d.Status != structs.DeploymentStatusSuccessful || d.ModifyTime != 300 {
					t.Fatalf("deployment = %+v", d)
				}
			},
		},
		{
			name: "deployment status of an unknown deployment", mt: structs.DeploymentStatusUpdateRequestType,
			msg: &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: "nope",
				Status: structs.DeploymentStatusFailed}}, wantErr: structs.ErrNotFound,
		},
		{
			name: "job register without job", mt: structs.JobRegisterRequestType,
			msg: &structs.JobRegisterRequest{}, wantErr: structs.ErrInvalid,
		},
		{
			name: "acl policy upsert", mt: structs.ACLPolicyUpsertRequestType,
			msg: &structs.ACLPolicyUpsertRequest{Policies: []*structs.ACLPolicy{{Name: "readonly", Rules: `node { policy = "read" }`}}},
			check: func(t *testing.T) {
				if p, _ := tf.State().ACLPolicyByName(nil, "readonly"); p == nil {
					t.Fatal("policy missing")
				}
			},
		},
		{
			name: "acl bootstrap", mt: structs.ACLBootstrapRequestType,
			msg: &structs.ACLBootstrapRequest{Token: &structs.ACLToken{AccessorID: "a1", SecretID: "s1", Type: structs.ACLTokenTypeManagement}},
			check: func(t *testing.T) {
				if b, _ := tf.State().ACLBootstrapped(nil); b == nil {
					t.Fatal("bootstrap not recorded")
				}
			},
		},
		{
			name: "acl bootstrap twice", mt: structs.ACLBootstrapRequestType,
			msg:     &structs.ACLBootstrapRequest{Token: &structs.ACLToken{AccessorID: "a2", SecretID: "s2", Type: structs.ACLTokenTypeManagement}},
			wantErr: structs.ErrACLBootstrapped,
		},
		{
			name: "acl token upsert", mt: structs.ACLTokenUpsertRequestType,
			msg: &structs.ACLTokenUpsertRequest{Tokens: []*structs.ACLToken{{AccessorID: "a3", SecretID: "s3", Type: structs.ACLTokenTypeClient, Policies: []string{"readonly"}}}},
			check: func(t *testing.T) {
				if tok, _ := tf.State().ACLTokenBySecret(nil, "s3"); tok == nil || tok.AccessorID != "a3" {
					t.Fatalf("token by secret = %+v", tok)
				}
			},
		},
		{
			name: "acl token upsert reusing a secret", mt: structs.ACLTokenUpsertRequestType,
			msg:     &structs.ACLTokenUpsertRequest{Tokens: []*structs.ACLToken{{AccessorID: "a4", SecretID: "s3"}}},
			wantErr: structs.ErrInvalid,
		},
		{
			name: "acl token delete", mt: structs.ACLTokenDeleteRequestType,
			msg: &structs.ACLTokenDeleteRequest{AccessorIDs: []string{"a3"}},
			check: func(t *testing.T) {
				if tok, _ := tf.State().ACLTokenBySecret(nil, "s3"); tok != nil {
					t.Fatal("token still there")
				}
			},
		},
		{
			name: "acl policy delete", mt: structs.ACLPolicyDeleteRequestType,
			msg: &structs.ACLPolicyDeleteRequest{Names: []string{"readonly"}},
		},
		{
			name: "acl policy delete missing", mt: structs.ACLPolicyDeleteRequestType,
			msg: &structs.ACLPolicyDeleteRequest{Names: []string{"readonly"}}, wantErr: structs.ErrNotFound,
		},
		// Node pools.
		{
			name: "node pool upsert", mt: structs.NodePoolUpsertRequestType,
			msg: &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "gpu", Scaling: &structs.PoolScalingPolicy{Provider: "exec", Max: 2}}}},
			check: func(t *testing.T) {
				if p, _ := tf.State().NodePoolByName(nil, "gpu"); p == nil || p.Scaling.Max != 2 {
					t.Fatalf("pool = %+v", p)
				}
			},
		},
		{
			name: "node pool upsert all", mt: structs.NodePoolUpsertRequestType,
			msg: &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "all", Description: "x"}}}, wantErr: structs.ErrInvalid,
		},
		{
			name: "node pool delete built-in", mt: structs.NodePoolDeleteRequestType,
			msg: &structs.NodePoolDeleteRequest{Names: []string{"default"}}, wantErr: structs.ErrInvalid,
		},
		{
			name: "node pool delete", mt: structs.NodePoolDeleteRequestType,
			msg: &structs.NodePoolDeleteRequest{Names: []string{"gpu"}},
			check: func(t *testing.T) {
				if p, _ := tf.State().NodePoolByName(nil, "gpu"); p != nil {
					t.Fatalf("pool still there: %+v", p)
				}
			},
		},
	}
	for i, st := range steps {
		index := uint64(i + 1)
		ok := t.Run(st.name, func(t *testing.T) {
			before := tf.hash(t)
			freedBefore := len(tf.freedIndexes())
			resp := tf.applyMsg(t, index, st.mt, st.msg)
			if st.wantErr != nil {
				err, _ := resp.(error)
				if !errors.Is(err, st.wantErr) {
					t.Fatalf("response = %v, want %v", resp, st.wantErr)
				}
				if tf.hash(t) != before {
					t.Fatal("a failed entry changed the state")
				}
			} else if resp != nil {
				t.Fatalf("response = %v", resp)
			}
			freed := tf.freedIndexes()
			gotFreed := len(freed) > freedBefore
			if gotFreed != st.wantFreed {
				t.Fatalf("OnCapacityFreed called = %v, want %v (calls %v)", gotFreed, st.wantFreed, freed)
			}
			if gotFreed && freed[len(freed)-1] != index {
				t.Fatalf("OnCapacityFreed index = %d, want %d", freed[len(freed)-1], index)
			}
			if st.check != nil {
				st.check(t)
			}
		})
		if !ok {
			t.FailNow()
		}
	}
	// 18 types above, and the 2 of node pools; the 3 of periodic and
	// parameterized jobs, whose answers are results rather than nil, are
	// in children_test.go; the 3 of service registrations in
	// commands_services_test.go; the 2 of endpoint aliases in
	// commands_endpoint_aliases_test.go; the 3 of provisioning in
	// commands_provision_test.go.
	if every := registeredTypes(); len(every) != 18+2+3+deploymentMessageTypes+3+2+provisionMessageTypes {
		t.Fatalf("registered types = %v", every)
	}
}

func registeredTypes() []structs.MessageType {
	var out []structs.MessageType
	for mt := range commands {
		out = append(out, mt)
	}
	slices.Sort(out)
	return out
}

func TestApplyUnknownAndMalformed(t *testing.T) {
	cases := []struct {
		name    string
		data    []byte
		wantErr error // nil: skipped without error
	}{
		{"empty", nil, ErrEmptyMessage},
		{"unknown type", []byte{77, 0x80}, ErrUnknownMessageType},
		{"unknown type with ignore flag", []byte{byte(structs.IgnoreUnknownTypeFlag | 77), 0x80}, nil},
		{"malformed body", []byte{byte(structs.JobRegisterRequestType), 0xc1, 0xff}, structs.ErrDecode},
		{"truncated body", []byte{byte(structs.NodeRegisterRequestType), 0x81, 0xa4, 'N', 'o'}, structs.ErrDecode},
		{"wrong shape", []byte{byte(structs.EvalUpdateRequestType), 0x81, 0xa5, 'E', 'v', 'a', 'l', 's', 0x05}, structs.ErrDecode},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tf := newTestFSM(t)
			before := tf.hash(t)
			resp := tf.RaftFSM().Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: c.data})
			if c.wantErr == nil {
				if resp != nil {
					t.Fatalf("response = %v, want nil", resp)
				}
			} else if err, _ := resp.(error); !errors.Is(err, c.wantErr) {
				t.Fatalf("response = %v, want %v", resp, c.wantErr)
			}
			if tf.hash(t) != before {
				t.Fatal("state changed")
			}
		})
	}
}

func TestApplyKnownTypeWithIgnoreFlag(t *testing.T) {
	tf := newTestFSM(t)
	node := statetest.Node(0)
	resp := tf.applyMsg(t, 1, structs.NodeRegisterRequestType|structs.IgnoreUnknownTypeFlag, &structs.NodeRegisterRequest{Node: node})
	if resp != nil {
		t.Fatalf("response = %v", resp)
	}
	if n, _ := tf.State().NodeByID(nil, node.ID); n == nil {
		t.Fatal("a known type with the ignore flag was not applied")
	}
}

func TestApplyMalformedObjectsDoNotPanic(t *testing.T) {
	job := statetest.Job()
	node := statetest.Node(1)
	node.Drivers["bad"] = nil
	alloc := statetest.Alloc(job, statetest.Node(0))
	alloc.AllocatedResources.Tasks["bad"] = nil
	cases := []struct {
		name string
		mt   structs.MessageType
		msg  interface{}
	}{
		{"node with nil driver", structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: node}},
		{"nil node", structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{}},
		{"alloc with nil task resources", structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{alloc}}},
		{"nil eval", structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{nil}}},
		{"register with eval without ID", structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: &structs.Evaluation{}}},
		{"client update nil alloc", structs.AllocClientUpdateRequestType, &structs.AllocClientUpdateRequest{Allocs: []*structs.Allocation{nil}}},
		// Node pools.
		{"nil node pool", structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{nil}}},
		{"node pool over its bounds", structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{
			{Name: "gpu", Scaling: &structs.PoolScalingPolicy{Provider: "docker", Max: structs.MaxPoolNodes + 1}}}}},
		{"node in pool all", structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: func() *structs.Node {
			n := statetest.Node(0)
			n.NodePool = structs.NodePoolAll
			return n
		}()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tf := newTestFSM(t)
			before := tf.hash(t)
			resp := tf.applyMsg(t, 1, c.mt, c.msg)
			if err, _ := resp.(error); !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("response = %v, want ErrInvalid", resp)
			}
			if tf.hash(t) != before {
				t.Fatal("a rejected entry changed the state")
			}
		})
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registering a type twice did not panic")
		}
	}()
	register(structs.NodeRegisterRequestType, (*FSM).applyNodeRegister)
}

func TestDecodeMessageRoundTrip(t *testing.T) {
	for mt, msg := range seedMessages() {
		buf, err := structs.Encode(mt, msg)
		if err != nil {
			t.Fatal(err)
		}
		got, req, err := DecodeMessage(buf)
		if err != nil || got != mt || req == nil {
			t.Fatalf("%s: type %s req %T err %v", mt, got, req, err)
		}
	}
}

// seedMessages returns one valid request per message type.
func seedMessages() map[structs.MessageType]interface{} {
	job := statetest.BatchJob(1)
	node := statetest.Node(1)
	alloc := statetest.Alloc(job, node)
	eval := statetest.Eval(job)
	return map[structs.MessageType]interface{}{
		structs.NodeRegisterRequestType:      &structs.NodeRegisterRequest{Node: node},
		structs.NodeDeregisterRequestType:    &structs.NodeDeregisterRequest{NodeID: node.ID},
		structs.NodeUpdateStatusRequestType:  &structs.NodeUpdateStatusRequest{NodeID: node.ID, Status: structs.NodeStatusDown, UpdatedAt: 1, Evals: []*structs.Evaluation{eval}},
		structs.JobRegisterRequestType:       &structs.JobRegisterRequest{Job: job, Eval: eval},
		structs.JobDeregisterRequestType:     &structs.JobDeregisterRequest{JobID: job.ID, Purge: true, Eval: eval},
		structs.EvalUpdateRequestType:        &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{eval}},
		structs.EvalDeleteRequestType:        &structs.EvalDeleteRequest{Evals: []string{eval.ID}, Allocs: []string{alloc.ID}},
		structs.ApplyPlanResultsRequestType:  &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{alloc}, Evals: []*structs.Evaluation{eval}, UpdatedAt: 2},
		structs.AllocClientUpdateRequestType: &structs.AllocClientUpdateRequest{Allocs: []*structs.Allocation{{ID: alloc.ID, ClientStatus: "running"}}, UpdatedAt: 3},
		structs.GCPurgeRequestType: &structs.GCPurgeRequest{
			Jobs:  []*structs.GCJobPurge{{JobID: job.ID, ModifyIndex: 2, Evals: []string{eval.ID}, Allocs: []string{alloc.ID}}},
			Nodes: []*structs.GCNodePurge{{NodeID: node.ID, ModifyIndex: 1}},
		},
		// Service registrations.
		structs.ServiceRegistrationUpsertRequestType: &structs.ServiceRegistrationUpsertRequest{Services: []*structs.ServiceRegistration{
			{ID: "_gpulayer-" + alloc.ID + "-g-web-http", ServiceName: "web", Namespace: "default", NodeID: node.ID, JobID: job.ID, AllocID: alloc.ID, Address: "127.0.0.1", Port: 20000}}},
		structs.ServiceRegistrationDeleteByIDRequestType:      &structs.ServiceRegistrationDeleteByIDRequest{Namespace: "default", IDs: []string{"x"}},
		structs.ServiceRegistrationDeleteByAllocIDRequestType: &structs.ServiceRegistrationDeleteByAllocIDRequest{AllocIDs: []string{alloc.ID}},
		// Job versions and deployments.
		structs.JobStabilityRequestType: &structs.JobStabilityRequest{JobID: job.ID, JobVersion: 0, Stable: true},
		structs.DeploymentStatusUpdateRequestType: &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: &structs.DeploymentStatusUpdate{
			DeploymentID: "d", Status: structs.DeploymentStatusFailed}, Job: job, Eval: eval, UpdatedAt: 4},
		structs.DeploymentPromoteRequestType: &structs.DeploymentPromoteRequest{DeploymentID: "d", All: true, Eval: eval},
		structs.DeploymentAllocHealthRequestType: &structs.DeploymentAllocHealthRequest{DeploymentID: "d", HealthyAllocationIDs: []string{alloc.ID},
			UnhealthyAllocationIDs: []string{"x"}, Timestamp: 5},
		// Node pools.
		structs.NodePoolUpsertRequestType: &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "gpu",
			Scaling: &structs.PoolScalingPolicy{Provider: "docker", Max: 1, ProviderConfig: map[string]string{"image": "x"}}}}},
		structs.NodePoolDeleteRequestType: &structs.NodePoolDeleteRequest{Names: []string{"gpu"}},
	}
}
