package command

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const poolStatusJSON = `{"Pool":{"Name":"gpu","Scaling":{"Provider":"docker","Min":0,"Max":4,"Shape":{"GPUCount":1},
 "Cooldown":30000000000,"IdleAfter":120000000000,"Idle":{"NoAllocations":true}}},
 "Hosts":2,
 "Nodes":[{"Name":"gpu-1a2b3c4d","NodeID":"5f0c7d9e-0000-0000-0000-000000000000","HostID":"c0ffee","State":"busy","Allocs":1},
          {"Name":"gpu-9e8d7c6b","HostID":"beef","State":"joining","Allocs":0}],
 "Pending":[{"ID":"77777777-aaaa","Pool":"gpu","Op":"create","Status":"failed","NodeName":"gpu-77777777","Reason":"r","Error":"docker create: no space","Attempts":2,
   "NextAttempt":"2026-11-30T12:00:08Z","CreateTime":"2026-11-30T11:59:00Z","ModifyTime":"2026-11-30T12:00:00Z"}],
 "Decisions":[{"Index":12,"Time":"2026-11-30T11:59:00Z","Op":"create","Count":3,"Reason":"3 blocked evals need nvidia/gpu x 1: +3"}],
 "Failed":[{"ID":"77777777-aaaa","Pool":"gpu","Op":"create","Status":"failed","Reason":"r","Error":"docker create: no space","Attempts":2,
   "CreateTime":"2026-11-30T11:59:00Z","ModifyTime":"2026-11-30T12:00:00Z"}],
 "Waiting":["gang of 4 needs nvidia/gpu x 1 all at once: max 4 leaves room for 1"]}`

// TestNodePoolStatus renders one pool's nodes, pending requests, decisions
// and failed calls, and the one-line-per-pool summary.
func TestNodePoolStatus(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/node/pool/gpu/status":
			_, _ = w.Write([]byte(poolStatusJSON))
		case "/v1/node/pools":
			_, _ = w.Write([]byte(`[{"Name":"default"},{"Name":"gpu","Scaling":{"Provider":"docker","Max":4}}]`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer ts.Close()
	res := runCmd(t, ts.URL, "node", "pool", "status", "gpu")
	if res.code != 0 {
		t.Fatalf("code %d: %s", res.code, res.err)
	}
	for _, want := range []string{"Hosts      = 2", "gpu-1a2b3c4d  5f0c7d9e  c0ffee   busy", "joining",
		"3 blocked evals need nvidia/gpu x 1: +3", "docker create: no space", "2026-11-30T12:00:08Z",
		"Waiting (blocked work this pool makes no hosts for)\ngang of 4 needs nvidia/gpu x 1 all at once: max 4 leaves room for 1"} {
		if !strings.Contains(res.out, want) {
			t.Errorf("output lacks %q:\n%s", want, res.out)
		}
	}
	res = runCmd(t, ts.URL, "node", "pool", "status")
	if res.code != 0 || !strings.Contains(res.out, "gpu   docker    2      0-4      1        1       1        3 blocked evals need nvidia/gpu x 1: +3") {
		t.Fatalf("summary (code %d):\n%s%s", res.code, res.out, res.err)
	}
	if res := runCmd(t, ts.URL, "node", "pool", "status", "nope"); res.code != 1 || !strings.Contains(res.err, "nope") {
		t.Fatalf("unknown pool: code %d %s", res.code, res.err)
	}
}
