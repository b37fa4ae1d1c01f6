package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// poolJobHCL is a one-GPU batch job in node pool pool.
func poolJobHCL(id, pool string) string {
	return fmt.Sprintf(`job %q {
  type      = "batch"
  node_pool = %q
  group "g" {
    task "main" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo in-pool; exit 0"]
      }
      resources {
        cpu    = 100
        memory = 64
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`, id, pool)
}

// TestE2ENodePools runs agent -dev with -node-pool=gpu: the node is in
// pool gpu (created by its registration), a job in gpu runs there, a job
// in another pool stays blocked with the reason naming both pools, and
// the pool in use cannot be deleted; the CLI verbs show all of it.
func TestE2ENodePools(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	a := startDevAgent(t, t.TempDir(), "-node-pool=gpu")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	var nodes []*api.NodeListStub
	waittest.For(t, 30*time.Second, "the node in pool gpu", func() (bool, string) {
		code := a.getJSON("/v1/node/pool/gpu/nodes", &nodes)
		return code == 200 && len(nodes) == 1, fmt.Sprintf("status %d, %d nodes", code, len(nodes))
	})
	if nodes[0].NodePool != "gpu" {
		t.Fatalf("node pool = %q", nodes[0].NodePool)
	}
	var node api.Node
	if code := a.getJSON("/v1/node/"+nodes[0].ID, &node); code != 200 || node.NodePool != "gpu" {
		t.Fatalf("node read: %d %q", code, node.NodePool)
	}
	if out, code := a.cli("node", "pool", "list"); code != 0 || !strings.Contains(out, "gpu") || !strings.Contains(out, "default") || !strings.Contains(out, "all") {
		t.Fatalf("node pool list: %d\n%s", code, out)
	}
	if out, code := a.cli("node", "pool", "nodes", "gpu"); code != 0 || !strings.Contains(out, nodes[0].ID[:8]) {
		t.Fatalf("node pool nodes gpu: %d\n%s", code, out)
	}

	// A job in the node's pool runs.
	if out, code := a.cli("job", "run", "-detach", write("in.hcl", poolJobHCL("in-pool", "gpu"))); code != 0 {
		t.Fatalf("job run in-pool: %d\n%s\n%s", code, out, a.logText())
	}
	alloc := a.waitAllocStatus("in-pool", structs.AllocClientStatusComplete, structs.AllocClientStatusFailed)
	if alloc.ClientStatus != structs.AllocClientStatusComplete || alloc.NodeID != nodes[0].ID {
		t.Fatalf("in-pool allocation %s on %s", alloc.ClientStatus, alloc.NodeID)
	}
	if out, code := a.cli("node", "pool", "jobs", "gpu"); code != 0 || !strings.Contains(out, "in-pool") {
		t.Fatalf("node pool jobs gpu: %d\n%s", code, out)
	}

	// A job naming a pool that does not exist is refused.
	if out, code := a.cli("job", "run", "-detach", write("lost.hcl", poolJobHCL("lost", "other"))); code == 0 || !strings.Contains(out, `node pool \"other\" does not exist`) && !strings.Contains(out, `node pool "other" does not exist`) {
		t.Fatalf("job run in a missing pool: %d\n%s", code, out)
	}
	// Once the pool exists, the job is accepted but blocked: the only node
	// is in gpu.
	pool := write("other.hcl", "node_pool \"other\" {\n  description = \"no nodes yet\"\n}\n")
	if out, code := a.cli("node", "pool", "apply", pool); code != 0 || !strings.Contains(out, `Successfully applied node pool "other"!`) {
		t.Fatalf("node pool apply: %d\n%s", code, out)
	}
	if out, code := a.cli("job", "run", "-detach", write("other-job.hcl", poolJobHCL("elsewhere", "other"))); code != 0 {
		t.Fatalf("job run elsewhere: %d\n%s", code, out)
	}
	const reason = "node pool: node in pool gpu, job wants other"
	waittest.For(t, 30*time.Second, "a blocked evaluation naming the pools", func() (bool, string) {
		var evals []*api.Evaluation
		if code := a.getJSON("/v1/job/elsewhere/evaluations", &evals); code != 200 {
			return false, fmt.Sprintf("status %d", code)
		}
		for _, e := range evals {
			if m := e.FailedTGAllocs["g"]; m != nil && m.ConstraintFiltered[reason] == 1 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d evals", len(evals))
	})
	var allocs []*api.Allocation
	if a.getJSON("/v1/job/elsewhere/allocations", &allocs); len(allocs) != 0 {
		t.Fatalf("elsewhere has %d allocations, want none", len(allocs))
	}

	// A pool with a node in it cannot be deleted; an unused one can, once
	// its job is gone.
	if out, code := a.cli("node", "pool", "delete", "gpu"); code == 0 || !strings.Contains(out, "in it") {
		t.Fatalf("node pool delete gpu: %d\n%s", code, out)
	}
	if out, code := a.cli("node", "pool", "delete", "other"); code == 0 || !strings.Contains(out, "elsewhere") {
		t.Fatalf("node pool delete other with a live job: %d\n%s", code, out)
	}
	if out, code := a.cli("job", "stop", "-purge", "elsewhere"); code != 0 {
		t.Fatalf("job stop: %d\n%s", code, out)
	}
	waittest.For(t, 30*time.Second, "pool other deleted", func() (bool, string) {
		out, code := a.cli("node", "pool", "delete", "other")
		return code == 0, out
	})
	if code := a.getJSON("/v1/node/pool/other", nil); code != 404 {
		t.Fatalf("GET deleted pool: %d", code)
	}
}
