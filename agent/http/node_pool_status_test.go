package http

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// failingProvider refuses every create, as an exec script exiting 1 does.
type failingProvider struct{}

func (failingProvider) Name() string { return "exec" }
func (failingProvider) Create(context.Context, provision.CreateRequest) (provision.Host, error) {
	return provision.Host{}, errors.New(`exec provider: create: exit status 1: "quota exceeded"`)
}
func (failingProvider) Terminate(context.Context, string, string) error { return nil }
func (failingProvider) List(context.Context, string) ([]provision.Host, error) {
	return nil, nil
}

// TestNodePoolStatusRoute: a pool whose provider fails shows the pending
// request, the decision that made it and the failed call with its error;
// an unknown pool is a 404.
func TestNodePoolStatusRoute(t *testing.T) {
	c := servertest.NewCluster(t, 1, servertest.WithConfig(func(cfg *server.Config) {
		cfg.Provision.Providers = func(*structs.NodePool) (provision.Provider, error) { return failingProvider{}, nil }
		cfg.Provision.Interval = 20 * time.Millisecond
		cfg.Provision.ExecCommands = []string{"/bin/false"}
	}))
	c.WaitForLeader()
	srv := c.Server(0)
	ts := serve(t, routedServer{Server: srv, mu: &sync.Mutex{}, urls: map[string]string{}})
	body := `{"NodePools":[{"Name":"gpu","Scaling":{"Provider":"exec","ProviderConfig":{"command":"/bin/false"},"Min":1,"Max":2,
  "Shape":{"GPUCount":1},"Idle":{"NoAllocations":true}}}]}`
	if resp, got := doReq(t, "PUT", ts.URL+"/v1/node/pools", body); resp.StatusCode != 200 {
		t.Fatalf("PUT pools = %d %s", resp.StatusCode, got)
	}
	var st api.NodePoolStatus
	waittest.For(t, 10*time.Second, "failed call on the pool's status", func() (bool, string) {
		resp, got := doReq(t, "GET", ts.URL+"/v1/node/pool/gpu/status", "")
		if resp.StatusCode != 200 {
			return false, got
		}
		st = api.NodePoolStatus{}
		if err := json.Unmarshal([]byte(got), &st); err != nil {
			t.Fatal(err)
		}
		return len(st.Failed) > 0, got
	})
	if !strings.Contains(st.Failed[0].Error, "quota exceeded") || st.Failed[0].NextAttempt.IsZero() || st.Failed[0].Attempts < 1 {
		t.Fatalf("failed call = %+v", st.Failed[0])
	}
	if len(st.Pending) != 1 || len(st.Decisions) != 1 || st.Decisions[0].Reason != "pool below min 1: +1" || st.Pool.Name != "gpu" || st.Hosts != 0 {
		t.Fatalf("status = %+v", st)
	}
	// The UI's pools page shows the same.
	resp, page := doReq(t, "GET", ts.URL+"/ui/pools", "")
	for _, want := range []string{"pool below min 1: &#43;1", "quota exceeded", `id="pool-gpu"`} {
		if resp.StatusCode != 200 || !strings.Contains(page, want) {
			t.Fatalf("/ui/pools = %d, lacks %q:\n%s", resp.StatusCode, want, page)
		}
	}
	// A job of the pool asking more GPUs than its hosts have blocks, and
	// the status (API and UI) says no host of the pool can place it.
	job := statetest.BatchJob(2)
	job.NodePool = "gpu"
	if _, err := srv.JobRegister(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 10*time.Second, "the pool's status names the job no host can place", func() (bool, string) {
		resp, got := doReq(t, "GET", ts.URL+"/v1/node/pool/gpu/status", "")
		st = api.NodePoolStatus{}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(got), &st) != nil {
			return false, got
		}
		return len(st.Waiting) == 1 && strings.Contains(st.Waiting[0], "asks 2 GPUs an allocation, a host of this pool has 1"), got
	})
	if resp, page := doReq(t, "GET", ts.URL+"/ui/pools", ""); resp.StatusCode != 200 || !strings.Contains(page, "asks 2 GPUs an allocation") {
		t.Fatalf("/ui/pools = %d, lacks the waiting job:\n%s", resp.StatusCode, page)
	}
	if resp, got := doReq(t, "GET", ts.URL+"/v1/node/pool/nope/status", ""); resp.StatusCode != 404 {
		t.Fatalf("unknown pool = %d %s", resp.StatusCode, got)
	}
}
