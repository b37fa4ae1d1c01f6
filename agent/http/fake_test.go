package http

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/gpulayer/gpulayer/structs"
)

// fakeServer is an in-memory Server: canned objects, an error to return
// per method, and the last options and arguments it saw.
type fakeServer struct {
	mu        sync.Mutex
	jobs      map[string]*structs.Job
	allocs    map[string]*structs.Allocation
	evals     map[string]*structs.Evaluation
	nodes     map[string]*structs.Node
	meta      structs.QueryMeta
	errs      map[string]error
	leader    string
	lastQuery *structs.QueryOptions
	lastJob   *structs.Job
	lastPurge bool
}

func newFakeServer() *fakeServer {
	return &fakeServer{
		jobs:   map[string]*structs.Job{},
		allocs: map[string]*structs.Allocation{},
		evals:  map[string]*structs.Evaluation{},
		nodes:  map[string]*structs.Node{},
		errs:   map[string]error{},
		leader: "127.0.0.1:4657",
		meta:   structs.QueryMeta{Index: 42, KnownLeader: true},
	}
}

func (f *fakeServer) call(name string, q *structs.QueryOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastQuery = q
	return f.errs[name]
}

func (f *fakeServer) JobRegister(ctx context.Context, job *structs.Job) (*structs.JobRegisterResponse, error) {
	if err := f.call("JobRegister", nil); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.lastJob = job
	f.mu.Unlock()
	return &structs.JobRegisterResponse{EvalID: "eval-" + job.ID, EvalCreateIndex: 7, JobModifyIndex: 7, WriteMeta: structs.WriteMeta{Index: 7}}, nil
}

func (f *fakeServer) JobDeregister(ctx context.Context, jobID string, purge bool) (*structs.JobDeregisterResponse, error) {
	if err := f.call("JobDeregister", nil); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.lastPurge = purge
	f.mu.Unlock()
	if _, ok := f.jobs[jobID]; !ok {
		return nil, fmt.Errorf("job %q: %w", jobID, structs.ErrNotFound)
	}
	return &structs.JobDeregisterResponse{EvalID: "stop-" + jobID, JobModifyIndex: 9, WriteMeta: structs.WriteMeta{Index: 9}}, nil
}

func byPrefix[T any](m map[string]T, prefix string) []T {
	var out []T
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, v)
		}
	}
	return out
}

func get[T any](m map[string]*T, kind, id string) (*T, error) {
	v, ok := m[id]
	if !ok {
		return nil, fmt.Errorf("%s %q: %w", kind, id, structs.ErrNotFound)
	}
	return v, nil
}

func (f *fakeServer) JobList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Job, structs.QueryMeta, error) {
	if err := f.call("JobList", q); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	return byPrefix(f.jobs, q.Prefix), f.meta, nil
}

func (f *fakeServer) JobGet(ctx context.Context, id string, q *structs.QueryOptions) (*structs.Job, structs.QueryMeta, error) {
	if err := f.call("JobGet", q); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	j, err := get(f.jobs, "job", id)
	return j, f.meta, err
}

func (f *fakeServer) JobAllocations(ctx context.Context, id string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	if err := f.call("JobAllocations", q); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	var out []*structs.Allocation
	for _, a := range f.allocs {
		if a.JobID == id {
			out = append(out, a)
		}
	}
	return out, f.meta, nil
}

func (f *fakeServer) JobEvaluations(ctx context.Context, id string, q *structs.QueryOptions) ([]*structs.Evaluation, structs.QueryMeta, error) {
	if err := f.call("JobEvaluations", q); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	var out []*structs.Evaluation
	for _, e := range f.evals {
		if e.JobID == id {
			out = append(out, e)
		}
	}
	return out, f.meta, nil
}

func (f *fakeServer) AllocList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	if err := f.call("AllocList", q); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	return byPrefix(f.allocs, q.Prefix), f.meta, nil
}

func (f *fakeServer) AllocGet(ctx context.Context, id string, q *structs.QueryOptions) (*structs.Allocation, structs.QueryMeta, error) {
	if err := f.call("AllocGet", q); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	a, err := get(f.allocs, "allocation", id)
	return a, f.meta, err
}

func (f *fakeServer) EvalGet(ctx context.Context, id string, q *structs.QueryOptions) (*structs.Evaluation, structs.QueryMeta, error) {
	if err := f.call("EvalGet", q); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	e, err := get(f.evals, "evaluation", id)
	return e, f.meta, err
}

func (f *fakeServer) EvalList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Evaluation, structs.QueryMeta, error) {
	if err := f.call("EvalList", q); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	return byPrefix(f.evals, q.Prefix), f.meta, nil
}

func (f *fakeServer) NodeList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Node, structs.QueryMeta, error) {
	if err := f.call("NodeList", q); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	return byPrefix(f.nodes, q.Prefix), f.meta, nil
}

func (f *fakeServer) NodeGet(ctx context.Context, id string, q *structs.QueryOptions) (*structs.Node, structs.QueryMeta, error) {
	if err := f.call("NodeGet", q); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	n, err := get(f.nodes, "node", id)
	return n, f.meta, err
}

// NodeSecret implements nodeSecreter: the stored node's SecretID.
func (f *fakeServer) NodeSecret(id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[id]
	if !ok {
		return "", fmt.Errorf("node %q: %w", id, structs.ErrNotFound)
	}
	return n.SecretID, nil
}

func (f *fakeServer) Leader() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

func (f *fakeServer) Peers() []string { return []string{"127.0.0.1:4657"} }

func (f *fakeServer) Stats() map[string]string { return map[string]string{"state": "Leader"} }

// fakeClient serves logs from a pipe the test writes to, so following can
// be observed chunk by chunk.
type fakeClient struct {
	node *structs.Node
	// logs maps "alloc/task/type" to the log's content; a missing key is
	// ErrNotFound.
	logs map[string]string
	// follow, when set, is the reader returned for follow=true requests.
	follow io.ReadCloser
}

func (c *fakeClient) Node() *structs.Node { return c.node }

func (c *fakeClient) AllocLogs(ctx context.Context, allocID, task, logType string, follow bool) (io.ReadCloser, error) {
	content, ok := c.logs[allocID+"/"+task+"/"+logType]
	if !ok {
		return nil, fmt.Errorf("task %q of allocation %q: %w", task, allocID, structs.ErrNotFound)
	}
	if follow && c.follow != nil {
		return c.follow, nil
	}
	return io.NopCloser(strings.NewReader(content)), nil
}
