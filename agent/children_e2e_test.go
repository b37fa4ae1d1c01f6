package agent_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// childJob is what the tests read of a child in GET /v1/jobs.
type childJob struct {
	ID, ParentID, Status string
	Held                 bool
	CreateIndex          uint64
}

// renderHCL is a parameterized job that runs at most 2 children at once;
// each child prints its payload file and its meta, then sleeps a second.
const renderHCL = `job "render" {
  type                 = "batch"
  max_running_children = 2
  parameterized {
    payload       = "required"
    meta_required = ["frame"]
  }
  group "g" {
    task "t" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "cat local/in/payload.txt; echo \" frame=$NOMAD_META_frame\"; sleep 1"]
      }
      dispatch_payload { file = "in/payload.txt" }
      resources {
        cpu    = 100
        memory = 32
      }
    }
  }
}
`

// TestE2EDispatchMaxRunningChildren (Must show 3): a parameterized job with
// max_running_children = 2 dispatched 20 times with the CLI never runs
// more than 2 children at once (from the task start and finish times the
// client reports), and all 20 complete; the payload is in the task's
// local/ and the meta in its environment; job status lists the children.
func TestE2EDispatchMaxRunningChildren(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	a := startDevAgent(t, taskUserDir(t))
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "render.hcl")
	if err := os.WriteFile(jobFile, []byte(renderHCL), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := a.cli("job", "run", "-detach", jobFile); code != 0 {
		t.Fatalf("job run: %d %s", code, out)
	}
	payload := filepath.Join(dir, "payload.txt")
	if err := os.WriteFile(payload, []byte("scene-7"), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := 0; i < n; i++ {
		out, code := a.cli("job", "dispatch", "-detach", "-meta", fmt.Sprintf("frame=%d", i), "render", payload)
		if code != 0 || !strings.Contains(out, "Dispatched Job ID = render/dispatch-") {
			t.Fatalf("dispatch %d: %d %s", i, code, out)
		}
	}
	var children []childJob
	waittest.For(t, 3*time.Minute, "20 children dead", func() (bool, string) {
		children = nil
		var jobs []childJob
		if code := a.getJSON("/v1/jobs?prefix="+url.QueryEscape("render/"), &jobs); code != 200 {
			return false, fmt.Sprint(code)
		}
		dead := 0
		for _, j := range jobs {
			if j.ParentID == "render" {
				children = append(children, j)
				if j.Status == structs.JobStatusDead {
					dead++
				}
			}
		}
		return len(children) == n && dead == n, fmt.Sprintf("%d children, %d dead", len(children), dead)
	})
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	var first string
	for _, c := range children {
		var allocs []*api.Allocation
		if code := a.getJSON("/v1/job/"+url.PathEscape(c.ID)+"/allocations", &allocs); code != 200 || len(allocs) != 1 {
			t.Fatalf("allocations of %s: %d, %d", c.ID, code, len(allocs))
		}
		var al api.Allocation
		if code := a.getJSON("/v1/allocation/"+allocs[0].ID, &al); code != 200 {
			t.Fatalf("allocation %s: %d", allocs[0].ID, code)
		}
		ts := al.TaskStates["t"]
		if al.ClientStatus != api.AllocClientStatusComplete || ts == nil || ts.StartedAt.IsZero() || ts.FinishedAt.Before(ts.StartedAt) {
			t.Fatalf("child %s: alloc %s, task %+v", c.ID, al.ClientStatus, ts)
		}
		edges = append(edges, edge{ts.StartedAt.UnixNano(), 1}, edge{ts.FinishedAt.UnixNano(), -1})
		if first == "" {
			first = al.ID
		}
	}
	// Ends sort before starts at the same instant: a child that starts as
	// another ends does not overlap it.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta
	})
	running, most := 0, 0
	for _, e := range edges {
		running += e.delta
		most = max(most, running)
	}
	if most > 2 {
		t.Fatalf("%d children ran at once, max_running_children is 2", most)
	}
	t.Logf("at most %d of %d children ran at once (max_running_children = 2)", most, n)
	out, code := a.cli("alloc", "logs", first, "t")
	if code != 0 || !strings.Contains(out, "scene-7") || !strings.Contains(out, "frame=") {
		t.Fatalf("child output %d %q: want the payload and the meta", code, out)
	}
	out, code = a.cli("job", "status", "render")
	if code != 0 || !strings.Contains(out, "Dispatched Jobs") || strings.Count(out, "render/dispatch-") != n ||
		!strings.Contains(out, "Max Running Children") {
		t.Fatalf("job status render: %d %s", code, out)
	}
	out, code = a.cli("job", "status", children[0].ID)
	if code != 0 || !strings.Contains(out, "Parent") || !strings.Contains(out, "= render") {
		t.Fatalf("job status of a child: %d %s", code, out)
	}
	out, code = a.cli("job", "dispatch", "-detach", "render", payload)
	if code == 0 || !strings.Contains(out, `missing required key \"frame\"`) && !strings.Contains(out, `missing required key "frame"`) {
		t.Fatalf("dispatch without the required meta: %d %s", code, out)
	}
	// A cron the server refuses is shown at its line of the file.
	bad := filepath.Join(dir, "bad.hcl")
	src := strings.Replace(renderHCL, "  parameterized {\n    payload       = \"required\"\n    meta_required = [\"frame\"]\n  }",
		"  periodic {\n    crons = [\"61 * * * *\"]\n  }", 1)
	if src == renderHCL {
		t.Fatal("bad.hcl: replacement did not apply")
	}
	if err := os.WriteFile(bad, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = a.cli("job", "run", "-detach", bad)
	if code == 0 || !strings.Contains(out, bad+":5:") || !strings.Contains(out, "periodic: crons:") {
		t.Fatalf("job run with a bad cron: %d %s", code, out)
	}
}

// periodicBody is a periodic batch job (JSON for /v1/jobs) launched every
// minute whose task sleeps sleep seconds.
func periodicBody(id string, prohibitOverlap bool, sleep int) map[string]interface{} {
	return map[string]interface{}{"Job": map[string]interface{}{
		"ID": id, "Name": id, "Type": "batch",
		"Periodic": map[string]interface{}{"Enabled": true, "Specs": []string{"* * * * *"}, "SpecType": "cron", "ProhibitOverlap": prohibitOverlap},
		"TaskGroups": []interface{}{map[string]interface{}{"Name": "g", "Count": 1, "Tasks": []interface{}{map[string]interface{}{
			"Name": "t", "Driver": "native",
			"Config":    map[string]interface{}{"command": "/bin/sleep", "args": []string{fmt.Sprint(sleep)}},
			"Resources": map[string]interface{}{"CPU": 100, "MemoryMB": 32},
		}}}},
	}}
}

// TestClusterPeriodicAcrossLeaderKill (Must show 2): on 3 real servers, two
// jobs on a one-minute cron, one with prohibit_overlap whose child runs for
// minutes. The leader launches minute 1 and is killed with -9 a second
// before minute 2; the new leader launches minute 2 of the first job once
// (no miss), launches minute 1 of neither again (no duplicate), and the
// prohibit_overlap job gets no second child while its first runs. After
// the killed server is back, every server holds the same children.
func TestClusterPeriodicAcrossLeaderKill(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("starts four real agent processes and waits for two cron minutes (skipped under -short and -race)")
	}
	c := startCluster(t, 3, 1, 0)
	live := func() *proc {
		for _, p := range c.servers {
			if p.alive() {
				return p
			}
		}
		t.Fatal("no server alive")
		return nil
	}
	// Register right after a minute starts, so minute 1 is the next one.
	if s := time.Now().Second(); s > 50 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
	for _, j := range []struct {
		id      string
		overlap bool
		sleep   int
	}{{"tick", false, 1}, {"long", true, 600}} {
		if code, body := c.send(live(), http.MethodPut, "/v1/jobs", periodicBody(j.id, j.overlap, j.sleep), nil); code != 200 {
			t.Fatalf("register %s: %d %s", j.id, code, body)
		}
	}
	minute1 := time.Now().Truncate(time.Minute).Add(time.Minute)
	minute2 := minute1.Add(time.Minute)
	id := func(job string, at time.Time) string { return structs.PeriodicChildID(job, at.Unix()) }
	children := func(p *proc, job string) []string {
		var jobs []childJob
		if err := c.get(p, "/v1/jobs?stale&prefix="+url.QueryEscape(job+"/"), &jobs); err != nil {
			return []string{"error: " + err.Error()}
		}
		var out []string
		for _, j := range jobs {
			if j.ParentID == job {
				out = append(out, j.ID)
			}
		}
		slices.Sort(out)
		return out
	}
	// waitFor waits until job's children are want, for 45 s past the
	// cron time of the newest one (due).
	waitFor := func(p func() *proc, due time.Time, job string, want ...string) {
		t.Helper()
		waittest.For(t, time.Until(due)+45*time.Second, fmt.Sprintf("%s children %v", job, want), func() (bool, string) {
			got := children(p(), job)
			return slices.Equal(got, want), fmt.Sprint(got)
		})
	}
	waitFor(live, minute1, "tick", id("tick", minute1))
	waitFor(live, minute1, "long", id("long", minute1))

	// Kill the leader a second before minute 2.
	time.Sleep(time.Until(minute2.Add(-time.Second)))
	old := c.leader()
	if old == nil {
		t.Fatal("no leader before the kill")
	}
	old.kill()
	leader := func() *proc {
		if l := c.leader(); l != nil {
			return l
		}
		return live()
	}
	waitFor(leader, minute2, "tick", id("tick", minute1), id("tick", minute2))
	newLeader := c.leader()
	if newLeader == nil || newLeader == old {
		t.Fatalf("leader after the kill: %v", newLeader)
	}
	// Minute 2 of the prohibit_overlap job is decided (recorded) without
	// a child while minute 1's still runs.
	time.Sleep(3 * time.Second)
	if got := children(newLeader, "long"); !slices.Equal(got, []string{id("long", minute1)}) {
		t.Fatalf("long children %v: prohibit_overlap broken across the failover", got)
	}
	old.start()
	c.waitStable(60 * time.Second)
	for _, p := range c.servers {
		waitFor(func() *proc { return p }, minute2, "tick", id("tick", minute1), id("tick", minute2))
		if got := children(p, "long"); !slices.Equal(got, []string{id("long", minute1)}) {
			t.Fatalf("%s: long children %v", p.name, got)
		}
	}
	t.Logf("killed %s at %s; minute 2 launched by %s", old.name, minute2.Add(-time.Second).Format(time.RFC3339), newLeader.name)
}
