package http

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
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

// TestNodePoolStatusWaitingHidesOtherNamespaces (hostile17): the pool
// status names blocked jobs no host can place (Waiting). A node-read token
// that may not list jobs of namespace "secret" must not learn a job ID or
// task group of it there, on the API or the UI's pools page, as the pool's
// jobs route already hides them; a token that may read it still sees the
// line.
func TestNodePoolStatusWaitingHidesOtherNamespaces(t *testing.T) {
	c := servertest.NewCluster(t, 1, servertest.WithConfig(func(cfg *server.Config) {
		cfg.Provision.Providers = func(*structs.NodePool) (provision.Provider, error) { return failingProvider{}, nil }
		cfg.Provision.Interval = 20 * time.Millisecond
		cfg.Provision.ExecCommands = []string{"/bin/false"}
	}))
	c.WaitForLeader()
	srv := c.Server(0)
	ctx := context.Background()
	mgmt, err := srv.ACLBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	token := func(name, rules string) string {
		t.Helper()
		if _, err := srv.ACLPolicyUpsert(ctx, &structs.ACLPolicy{Name: name, Rules: rules}); err != nil {
			t.Fatal(err)
		}
		tok, err := srv.ACLTokenUpsert(ctx, &structs.ACLToken{Name: name, Type: structs.ACLTokenTypeClient, Policies: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		return tok.SecretID
	}
	nodeOnly := token("nodeonly", `node { policy = "read" }
namespace "default" { policy = "read" }`)
	secretReader := token("secretreader", `node { policy = "read" }
namespace "secret" { policy = "read" }`)
	hh, err := New(Config{Server: srv, ACLEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(hh)
	t.Cleanup(ts.Close)
	hdr := func(s string) map[string]string { return map[string]string{HeaderNomadToken: s} }
	body := `{"NodePools":[{"Name":"gpu","Scaling":{"Provider":"exec","ProviderConfig":{"command":"/bin/false"},"Min":0,"Max":2,
  "Shape":{"GPUCount":1},"Idle":{"NoAllocations":true}}}]}`
	if code, got, _ := send(t, "PUT", ts.URL+"/v1/node/pools", []byte(body), hdr(mgmt.SecretID)); code != 200 {
		t.Fatalf("PUT pools = %d %s", code, got)
	}
	job := statetest.BatchJob(2)
	job.ID, job.Name = "secret-train", "secret-train"
	job.Namespace = "secret"
	job.NodePool = "gpu"
	job.TaskGroups[0].Name = "hidden-group"
	if _, err := srv.JobRegister(ctx, job); err != nil {
		t.Fatal(err)
	}
	status := func(tok string) (int, string, *api.NodePoolStatus) {
		code, got, _ := send(t, "GET", ts.URL+"/v1/node/pool/gpu/status", nil, hdr(tok))
		var st api.NodePoolStatus
		if code == 200 {
			if err := json.Unmarshal(got, &st); err != nil {
				t.Fatalf("decode %s: %v", got, err)
			}
		}
		return code, string(got), &st
	}
	// The line is there for a token that may read the namespace.
	waittest.For(t, 10*time.Second, "the secret job named in Waiting", func() (bool, string) {
		code, got, st := status(secretReader)
		return code == 200 && len(st.Waiting) == 1 && strings.Contains(st.Waiting[0], "secret-train"), got
	})
	code, got, _ := status(nodeOnly)
	if code != 200 {
		t.Fatalf("status for a node reader = %d %s", code, got)
	}
	for _, leak := range []string{"secret-train", "hidden-group"} {
		if strings.Contains(got, leak) {
			t.Errorf("pool status for a token without namespace secret names %q: %s", leak, got)
		}
	}
	code, page, _ := send(t, "GET", ts.URL+"/ui/pools", nil, hdr(nodeOnly))
	if code != 200 {
		t.Fatalf("/ui/pools = %d %s", code, page)
	}
	for _, leak := range []string{"secret-train", "hidden-group"} {
		if strings.Contains(string(page), leak) {
			t.Errorf("/ui/pools for a token without namespace secret names %q", leak)
		}
	}
}
