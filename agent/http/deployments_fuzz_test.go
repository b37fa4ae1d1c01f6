package http

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// fakeDeploymentServer answers the deployment routes for one running
// deployment "d1", checking its arguments as the real server does.
type fakeDeploymentServer struct {
	*fakeServer
}

var fakeDeployment = &structs.Deployment{ID: "d1", Namespace: "default", JobID: "web", Status: structs.DeploymentStatusRunning,
	TaskGroups: map[string]*structs.DeploymentState{"web": {DesiredTotal: 3}}}

func (f *fakeDeploymentServer) get(id string) (*structs.Deployment, error) {
	if id != "d1" {
		return nil, fmt.Errorf("deployment %q: %w", id, structs.ErrNotFound)
	}
	return fakeDeployment, nil
}

func (f *fakeDeploymentServer) DeploymentList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Deployment, structs.QueryMeta, error) {
	return []*structs.Deployment{fakeDeployment}, structs.QueryMeta{Index: 1}, nil
}
func (f *fakeDeploymentServer) DeploymentGet(ctx context.Context, id string, q *structs.QueryOptions) (*structs.Deployment, structs.QueryMeta, error) {
	d, err := f.get(id)
	return d, structs.QueryMeta{Index: 1}, err
}
func (f *fakeDeploymentServer) JobDeployments(ctx context.Context, jobID string, q *structs.QueryOptions) ([]*structs.Deployment, structs.QueryMeta, error) {
	return []*structs.Deployment{fakeDeployment}, structs.QueryMeta{Index: 1}, nil
}
func (f *fakeDeploymentServer) DeploymentAllocations(ctx context.Context, id string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error) {
	_, err := f.get(id)
	return nil, structs.QueryMeta{Index: 1}, err
}
func (f *fakeDeploymentServer) DeploymentPromote(ctx context.Context, args *structs.DeploymentPromoteArgs) (*structs.DeploymentUpdateResponse, error) {
	if !args.All && len(args.Groups) == 0 {
		return nil, fmt.Errorf("%w: no groups", structs.ErrInvalid)
	}
	_, err := f.get(args.DeploymentID)
	return &structs.DeploymentUpdateResponse{}, err
}
func (f *fakeDeploymentServer) DeploymentFail(ctx context.Context, id string) (*structs.DeploymentUpdateResponse, error) {
	_, err := f.get(id)
	return &structs.DeploymentUpdateResponse{}, err
}
func (f *fakeDeploymentServer) DeploymentPause(ctx context.Context, id string, pause bool) (*structs.DeploymentUpdateResponse, error) {
	_, err := f.get(id)
	return &structs.DeploymentUpdateResponse{}, err
}
func (f *fakeDeploymentServer) DeploymentSetAllocHealth(ctx context.Context, args *structs.DeploymentAllocHealthArgs) (*structs.DeploymentUpdateResponse, error) {
	if len(args.HealthyAllocationIDs)+len(args.UnhealthyAllocationIDs) == 0 {
		return nil, fmt.Errorf("%w: no allocations", structs.ErrInvalid)
	}
	_, err := f.get(args.DeploymentID)
	return &structs.DeploymentUpdateResponse{}, err
}

// FuzzDeploymentRoutes sends arbitrary bodies to the deployment write
// routes: never a 5xx, every refusal with an error body.
func FuzzDeploymentRoutes(f *testing.F) {
	f.Add(`{"DeploymentID":"d1","All":true}`, "d1")
	f.Add(`{"Groups":["web",null]}`, "d1")
	f.Add(`{"HealthyAllocationIDs":["a"],"UnhealthyAllocationIDs":[1]}`, "d1")
	f.Add(`{"Pause":"yes"}`, "nope")
	f.Add(`[`, "%zz")
	h, err := New(Config{Server: &fakeDeploymentServer{fakeServer: newFakeServer()}, MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, id string) {
		if strings.ContainsAny(id, "/?#%\x00") || id == "" {
			return
		}
		for _, route := range []string{"promote", "fail", "pause", "allocation-health"} {
			req := httptest.NewRequest("PUT", "/", strings.NewReader(body))
			req.URL.Path = "/v1/deployment/" + route + "/" + id
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s with %q: status %d: %s", req.URL.Path, body, rec.Code, rec.Body)
			}
			if rec.Code != http.StatusOK && !strings.Contains(rec.Body.String(), `"error"`) {
				t.Fatalf("status %d without an error body: %s", rec.Code, rec.Body)
			}
		}
	})
}
