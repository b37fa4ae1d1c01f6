package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// populated returns an FSM with nodes, jobs (one stopped), allocations in
// several client states and evaluations, all applied through Raft entries.
func populated(t testing.TB) *testFSM {
	t.Helper()
	tf := newTestFSM(t)
	var index uint64
	apply := func(mt structs.MessageType, msg interface{}) {
		t.Helper()
		index++
		if resp := tf.applyMsg(t, index, mt, msg); resp != nil {
			t.Fatalf("apply %s: %v", mt, resp)
		}
	}
	n1, n2 := statetest.Node(4), statetest.Node(0)
	apply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n1})
	apply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n2})
	train, web := statetest.BatchJob(2), statetest.Job()
	e1, e2 := statetest.Eval(train), statetest.Eval(web)
	apply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: train, Eval: e1})
	apply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: web, Eval: e2})
	a1, a2 := statetest.Alloc(train, n1), statetest.Alloc(web, n2)
	blocked := statetest.Eval(web)
	blocked.Status = structs.EvalStatusBlocked
	blocked.FailedTGAllocs = map[string]*structs.AllocMetric{"web": {NodesEvaluated: 2, DimensionExhausted: map[string]int{"memory": 1}}}
	apply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{AllocsPlaced: []*structs.Allocation{a1, a2}, Evals: []*structs.Evaluation{blocked}, UpdatedAt: 100})
	apply(structs.AllocClientUpdateRequestType, &structs.AllocClientUpdateRequest{Allocs: []*structs.Allocation{{ID: a1.ID, ClientStatus: "running",
		TaskStates: map[string]*structs.TaskState{"server": {State: "running", Events: []*structs.TaskEvent{{Type: "Started", Time: 5, Details: map[string]string{"pid": "42"}}}}}}}, UpdatedAt: 200})
	apply(structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{JobID: web.ID, Eval: statetest.Eval(web)})
	// Job versions and deployments: a second version of train, a
	// deployment with a healthy allocation.
	train2 := train.Copy()
	train2.Priority = 70
	apply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: train2})
	d := &structs.Deployment{ID: structs.GenerateUUID(), JobID: train.ID, JobVersion: 1, Status: structs.DeploymentStatusRunning,
		TaskGroups: map[string]*structs.DeploymentState{"web": {DesiredTotal: 1}}}
	stored2, _ := tf.State().JobByID(nil, train.ID)
	a3 := statetest.Alloc(stored2, n1)
	a3.DeploymentID = d.ID
	apply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Deployment: d, AllocsPlaced: []*structs.Allocation{a3}, UpdatedAt: 300})
	apply(structs.DeploymentAllocHealthRequestType, &structs.DeploymentAllocHealthRequest{DeploymentID: d.ID, HealthyAllocationIDs: []string{a3.ID}, Timestamp: 400})
	// Node pools: a written pool with a scaling policy, a written
	// "default", and one created by a node registering into it.
	apply(structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{
		{Name: "gpu", Meta: map[string]string{"k": "v"}, Scaling: &structs.PoolScalingPolicy{Provider: "docker", Max: 3,
			ProviderConfig: map[string]string{"image": "x"}, Shape: structs.NodeShape{GPUCount: 1}}},
		{Name: "default", Description: "mine"}}})
	n3 := statetest.Node(0)
	n3.NodePool = "implicit"
	apply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n3})
	return tf
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := populated(t)
	b := snapshotBytes(t, src.FSM)

	dst := newTestFSM(t)
	old := dst.State()
	if err := restoreBytes(dst.FSM, b); err != nil {
		t.Fatal(err)
	}
	if src.hash(t) != dst.hash(t) {
		t.Fatal("restored state differs from the snapshotted one")
	}
	select {
	case <-old.AbandonCh():
	default:
		t.Fatal("the replaced store was not abandoned")
	}
	if dst.State() == old {
		t.Fatal("State() still returns the old store")
	}
	for _, table := range []string{state.TableJobs, state.TableNodes, state.TableAllocs, state.TableEvals, state.TableJobVersions, state.TableDeployments, state.TableNodePools} {
		a, _ := src.State().Index(table)
		b, _ := dst.State().Index(table)
		if a != b || a == 0 {
			t.Fatalf("%s index %d vs %d", table, a, b)
		}
	}
	rows, _ := dst.State().NodePoolRows(nil)
	if len(rows) != 3 || rows[1].Name != "gpu" || rows[1].Scaling == nil || rows[1].Scaling.ProviderConfig["image"] != "x" {
		t.Fatalf("restored node pools = %+v", rows)
	}
	// A restored FSM keeps applying: the same entry on both gives the same state.
	e := statetest.Eval(&structs.Job{ID: "x"})
	for _, f := range []*testFSM{src, dst} {
		if resp := f.applyMsg(t, 100, structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{e}}); resp != nil {
			t.Fatal(resp)
		}
	}
	if src.hash(t) != dst.hash(t) {
		t.Fatal("states diverged after one more entry")
	}
	// A snapshot of the restored state is byte-identical.
	if !bytes.Equal(snapshotBytes(t, src.FSM), snapshotBytes(t, dst.FSM)) {
		t.Fatal("snapshots of equal states differ")
	}
}

func TestSnapshotIsPointInTime(t *testing.T) {
	src := populated(t)
	want := src.hash(t)
	snap, err := src.RaftFSM().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// A write after Snapshot() is not in the persisted snapshot.
	if resp := src.applyMsg(t, 50, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: statetest.Node(0)}); resp != nil {
		t.Fatal(resp)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	dst := newTestFSM(t)
	if err := restoreBytes(dst.FSM, sink.Bytes()); err != nil {
		t.Fatal(err)
	}
	if dst.hash(t) != want {
		t.Fatal("snapshot holds writes made after it was taken")
	}
}

// craftSnapshot writes a snapshot of f's state with extra records (type,
// object) before the end record.
func craftSnapshot(t *testing.T, f *FSM, extra map[SnapshotRecordType]interface{}) []byte {
	t.Helper()
	snap, err := f.State().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	bw.WriteString(SnapshotMagic)
	bw.WriteByte(SnapshotFormatVersion)
	sw := &snapshotWriter{w: bw}
	if err := sw.record(SnapshotRecordIndex, &state.IndexEntry{Key: state.TableJobs, Value: 1}); err != nil {
		t.Fatal(err)
	}
	for rt, obj := range extra {
		if err := sw.record(rt, obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeState(sw, snap); err != nil {
		t.Fatal(err)
	}
	if err := sw.record(SnapshotRecordEnd, &snapshotTrailer{Records: sw.n}); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRestoreSkipsUnknownRecordTypes(t *testing.T) {
	src := populated(t)
	b := craftSnapshot(t, src.FSM, map[SnapshotRecordType]interface{}{
		100: map[string]interface{}{"Future": []interface{}{"a", 1, map[string]interface{}{"nested": true}}},
		200: "a plain string record",
	})
	dst := newTestFSM(t)
	if err := restoreBytes(dst.FSM, b); err != nil {
		t.Fatalf("restore with unknown records: %v", err)
	}
	if src.hash(t) != dst.hash(t) {
		t.Fatal("restored state differs")
	}
}

func TestRestoreRefusesBadSnapshots(t *testing.T) {
	src := populated(t)
	good := snapshotBytes(t, src.FSM)
	// endAt is where the end record starts: the good snapshot cut there
	// ends exactly on a record boundary.
	endAt := bytes.LastIndexByte(good, byte(SnapshotRecordEnd))

	withVersion := append([]byte(nil), good...)
	withVersion[len(SnapshotMagic)] = SnapshotFormatVersion + 1
	versionZero := append([]byte(nil), good...)
	versionZero[len(SnapshotMagic)] = 0
	badMagic := append([]byte("NOMADSNP"), good[len(SnapshotMagic):]...)
	garbled := append([]byte(nil), good...)
	for i := len(SnapshotMagic) + 40; i < len(SnapshotMagic)+60 && i < len(garbled); i++ {
		garbled[i] = 0xc1 // never used in msgpack
	}
	wrongCount := append([]byte(nil), good[:endAt]...)
	wrongCount = append(wrongCount, byte(SnapshotRecordEnd), 0x81, 0xa7, 'R', 'e', 'c', 'o', 'r', 'd', 's', 0x01)
	nilJob := craftSnapshot(t, src.FSM, map[SnapshotRecordType]interface{}{SnapshotRecordJob: &structs.Job{}})

	cases := []struct {
		name    string
		data    []byte
		wantErr error
	}{
		{"empty", nil, ErrSnapshotFormat},
		{"header only", good[:len(SnapshotMagic)+1], ErrSnapshotFormat},
		{"short header", good[:4], ErrSnapshotFormat},
		{"wrong magic", badMagic, ErrSnapshotFormat},
		{"other format version", withVersion, ErrSnapshotFormat},
		{"format version 0", versionZero, ErrSnapshotFormat},
		{"allocation naming no job record", craftSnapshot(t, src.FSM, map[SnapshotRecordType]interface{}{
			SnapshotRecordAllocRef: &snapshotAllocRef{JobRef: 99, Alloc: &structs.Allocation{ID: "a-1"}}}), structs.ErrInvalid},
		{"allocation job record with Ref 0", craftSnapshot(t, src.FSM, map[SnapshotRecordType]interface{}{
			SnapshotRecordAllocJob: &snapshotAllocJob{Ref: 0, Job: statetest.Job()}}), structs.ErrInvalid},
		{"allocation job record written twice", craftSnapshot(t, src.FSM, map[SnapshotRecordType]interface{}{
			SnapshotRecordAllocJob: &snapshotAllocJob{Ref: 1, Job: statetest.Job()}}), structs.ErrInvalid},
		{"allocation record without Alloc", craftSnapshot(t, src.FSM, map[SnapshotRecordType]interface{}{
			SnapshotRecordAllocRef: &snapshotAllocRef{}}), structs.ErrInvalid},
		{"cut on a record boundary", good[:endAt], ErrSnapshotFormat},
		{"cut inside a record", good[:len(good)/2], nil},
		{"cut inside the end record", good[:len(good)-1], nil},
		{"garbled", garbled, nil},
		{"wrong record count", wrongCount, ErrSnapshotFormat},
		{"job without ID", nilJob, structs.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := populated(t)
			old := dst.State()
			before := dst.hash(t)
			err := restoreBytes(dst.FSM, c.data)
			if err == nil {
				t.Fatal("restore succeeded")
			}
			if c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if dst.State() != old || dst.hash(t) != before {
				t.Fatal("a failed restore changed the state")
			}
			select {
			case <-old.AbandonCh():
				t.Fatal("a failed restore abandoned the store")
			default:
			}
		})
	}
}

// TestRestoreZeroIndexRoundTrips is a regression test found by FuzzRestore:
// an index record of 0 must restore like a missing row, so a restored state
// snapshots and restores to the same hash.
func TestRestoreZeroIndexRoundTrips(t *testing.T) {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	bw.WriteString(SnapshotMagic)
	bw.WriteByte(SnapshotFormatVersion)
	sw := &snapshotWriter{w: bw}
	for _, rec := range []*state.IndexEntry{{Key: state.TableNodes, Value: 0}, {Key: state.TableEvals, Value: 4}} {
		if err := sw.record(SnapshotRecordIndex, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.record(SnapshotRecordEnd, &snapshotTrailer{Records: sw.n}); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	first := newTestFSM(t)
	if err := restoreBytes(first.FSM, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	second := newTestFSM(t)
	if err := restoreBytes(second.FSM, snapshotBytes(t, first.FSM)); err != nil {
		t.Fatal(err)
	}
	if first.hash(t) != second.hash(t) {
		t.Fatal("a zero index row does not round-trip")
	}
	if idx, _ := second.State().LatestIndex(); idx != 4 {
		t.Fatalf("latest index = %d, want 4", idx)
	}
}

// TestSnapshotWritesEachAllocJobOnce checks format 2: allocations of one
// job version carry it in one SnapshotRecordAllocJob record, restore gives
// every allocation its job back (one shared copy), and a format 1
// snapshot (each allocation with its whole job) still restores to the
// same state.
func TestSnapshotWritesEachAllocJobOnce(t *testing.T) {
	src := newTestFSM(t)
	st := src.State()
	n := statetest.Node(8)
	if err := st.UpsertNode(1, n); err != nil {
		t.Fatal(err)
	}
	job := statetest.BatchJob(1)
	job.TaskGroups[0].Count = 5
	job.TaskGroups[0].Tasks[0].Env = map[string]string{"MARKER": "only-in-the-job-spec"}
	if err := st.UpsertJob(2, job); err != nil {
		t.Fatal(err)
	}
	stored, _ := st.JobByID(nil, job.ID)
	req := &structs.ApplyPlanResultsRequest{Job: stored, UpdatedAt: 3}
	for i := 0; i < 5; i++ {
		a := statetest.Alloc(stored, n)
		a.Job = nil
		req.AllocsPlaced = append(req.AllocsPlaced, a)
	}
	if err := st.UpsertPlanResults(3, req); err != nil {
		t.Fatal(err)
	}
	raw := snapshotBytes(t, src.FSM)
	if got := bytes.Count(raw, []byte("only-in-the-job-spec")); got != 3 {
		// Once in the job record, once in its job version record, once
		// in the one allocation job record.
		t.Fatalf("the job spec appears %d times in the snapshot, want 3", got)
	}
	dst := newTestFSM(t)
	if err := restoreBytes(dst.FSM, raw); err != nil {
		t.Fatal(err)
	}
	if src.hash(t) != dst.hash(t) {
		t.Fatal("restored state differs")
	}
	allocs, _ := dst.State().Allocs(nil)
	if len(allocs) != 5 {
		t.Fatalf("%d allocations restored", len(allocs))
	}
	for _, a := range allocs {
		if a.Job == nil || a.Job != allocs[0].Job || a.Job.ID != job.ID {
			t.Fatalf("allocation %s restored with job %p, want the one shared copy of %s", a.ID, a.Job, job.ID)
		}
	}

	// Format 1: the same state, each allocation with its whole job.
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	bw.WriteString(SnapshotMagic)
	bw.WriteByte(1)
	sw := &snapshotWriter{w: bw}
	for _, table := range []string{state.TableJobs, state.TableNodes, state.TableAllocs, state.TableJobVersions} {
		idx, _ := snap.Index(table)
		if err := sw.record(SnapshotRecordIndex, &state.IndexEntry{Key: table, Value: idx}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, _ := snap.Jobs(nil)
	nodes, _ := snap.Nodes(nil)
	old, _ := snap.Allocs(nil)
	for _, j := range jobs {
		_ = sw.record(SnapshotRecordJob, j)
	}
	for _, nd := range nodes {
		_ = sw.record(SnapshotRecordNode, nd)
	}
	for _, a := range old {
		_ = sw.record(SnapshotRecordAlloc, a)
	}
	versions, _ := snap.AllJobVersions(nil)
	for _, v := range versions {
		_ = sw.record(SnapshotRecordJobVersion, v)
	}
	if err := sw.record(SnapshotRecordEnd, &snapshotTrailer{Records: sw.n}); err != nil {
		t.Fatal(err)
	}
	_ = bw.Flush()
	v1 := newTestFSM(t)
	if err := restoreBytes(v1.FSM, buf.Bytes()); err != nil {
		t.Fatalf("format 1 restore: %v", err)
	}
	if src.hash(t) != v1.hash(t) {
		t.Fatal("format 1 restore differs")
	}
}
