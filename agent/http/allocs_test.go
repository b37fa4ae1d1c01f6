package http

import (
	"encoding/json"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// List routes leave the job out of each allocation; the get route keeps it.
func TestAllocListsOmitTheJob(t *testing.T) {
	fs, _, ts := fixture(t)
	for _, path := range []string{"/v1/allocations", "/v1/job/hello-gpu/allocations"} {
		resp, body := doReq(t, "GET", ts.URL+path, "")
		var allocs []*structs.Allocation
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &allocs) != nil || len(allocs) != 1 {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
		}
		if allocs[0].Job != nil || allocs[0].JobID != "hello-gpu" {
			t.Errorf("GET %s: Job = %v, JobID = %q; want no job and the job ID", path, allocs[0].Job, allocs[0].JobID)
		}
	}
	if fs.allocs["a1b2c3d4-0000"].Job == nil {
		t.Fatal("the list route changed the stored allocation")
	}
	resp, body := doReq(t, "GET", ts.URL+"/v1/allocation/a1b2c3d4-0000", "")
	var alloc structs.Allocation
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &alloc) != nil || alloc.Job == nil {
		t.Fatalf("GET allocation = %d %s, want the job included", resp.StatusCode, body)
	}
}
