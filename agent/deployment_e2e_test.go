package agent_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
)

// healthServerSrc is the model server stand-in: it serves /health and /
// (its version) on 127.0.0.1 at a free port, or with -fail exits 1 after
// half a second, as a version whose health check never passes.
const healthServerSrc = `package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	version := flag.String("version", "", "")
	fail := flag.Bool("fail", false, "")
	flag.Parse()
	if *fail {
		time.Sleep(500 * time.Millisecond)
		fmt.Fprintln(os.Stderr, "model weights corrupt")
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(2)
	}
	fmt.Println("serving", *version, "on", ln.Addr())
	http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, *version) })
	_ = http.Serve(ln, nil)
}
`

// buildHealthServer builds healthServerSrc into a directory native tasks
// may read.
func buildHealthServer(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(healthServerSrc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module healthserver\n\ngo 1.22\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(taskUserDir(t), "healthserver")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the health server: %v\n%s", err, out)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// webJob is the service "web" of count 3 under a rolling update that
// brings each new copy up before an old one stops, running bin with args.
func webJob(bin, args string) string {
	return `job "web" {
  type = "service"
  group "web" {
    count = 3
    update {
      max_parallel      = 1
      health_check      = "task_states"
      min_healthy_time  = "1s"
      healthy_deadline  = "20s"
      progress_deadline = "1m"
      auto_revert       = true
      max_unavailable   = 0
    }
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "server" {
      driver = "native"
      config {
        command = "` + bin + `"
        args    = [` + args + `]
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
`
}

// fetchJSON GETs url into out without failing the test (for a sampler
// goroutine).
func fetchJSON(url string, out interface{}) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// healthyCount counts the job's allocations that are told to run, are
// running and were judged healthy by their deployment.
func healthyCount(allocs []*api.Allocation) int {
	n := 0
	for _, a := range allocs {
		ds := a.DeploymentStatus
		if a.DesiredStatus == api.AllocDesiredStatusRun && a.ClientStatus == api.AllocClientStatusRunning && ds != nil && ds.Healthy != nil && *ds.Healthy {
			n++
		}
	}
	return n
}

// liveAlloc reports whether the allocation is told to run and not done.
func liveAlloc(a *api.Allocation) bool {
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return false
	}
	return a.DesiredStatus == api.AllocDesiredStatusRun
}

// TestE2EDeploymentRollingRevert is issue 13's "must show 2" with
// task_states health (the services feature adds /v1/service sampling): a
// service at version 0 with count 3; version 1 rolls out one at a time
// with never fewer than 3 healthy allocations (sampled every 100 ms);
// version 2, whose server fails, is reverted to version 1 automatically;
// job history lists the versions and job revert restores version 0. It
// also checks "must show 4": bad update blocks are refused naming the
// block and its file:line.
func TestE2EDeploymentRollingRevert(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	bin := buildHealthServer(t)
	a := startDevAgent(t, taskUserDir(t))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", a.logText())
		}
	})
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("bad update blocks", func(t *testing.T) {
		good := webJob(bin, `"-version", "v1"`)
		for _, tc := range []struct{ name, body, want string }{
			{"batch.hcl", strings.Replace(good, `type = "service"`, `type = "batch"`, 1),
				`batch.hcl:5:5: group "web": update: an update block is only allowed in a service job`},
			{"canary.hcl", strings.Replace(good, `max_parallel      = 1`, "max_parallel = 1\n      canary = 4", 1),
				`canary.hcl:7:7: group "web": update: canary: must be at most the group's count (3), got 4`},
			{"duration.hcl", strings.Replace(good, `"1s"`, `"1 minute"`, 1),
				`duration.hcl:8:27: Invalid duration`},
			{"order.hcl", strings.Replace(good, `"1s"`, `"30s"`, 1),
				`order.hcl:8:7: group "web": update: min_healthy_time: must be less than healthy_deadline (20s), got 30s`},
		} {
			out, code := a.cli("job", "run", "-detach", write(tc.name, tc.body))
			if code == 0 || !strings.Contains(out, tc.want) {
				t.Errorf("%s: exit %d, want a refusal containing %q:\n%s", tc.name, code, tc.want, out)
			}
		}
		if st := a.getJSON("/v1/job/web", nil); st != 404 {
			t.Fatalf("GET /v1/job/web = %d after refused submits, want 404", st)
		}
	})

	allocs := func() []*api.Allocation {
		var out []*api.Allocation
		if code := a.getJSON("/v1/job/web/allocations", &out); code != 200 {
			t.Fatalf("allocations: %d", code)
		}
		return out
	}
	latest := func() *api.Deployment {
		var d *api.Deployment
		if code := a.getJSON("/v1/job/web/deployment", &d); code != 200 {
			t.Fatalf("latest deployment: %d", code)
		}
		return d
	}
	waitDeployment := func(version uint64, status string) *api.Deployment {
		t.Helper()
		var d *api.Deployment
		waittest.For(t, 90*time.Second, fmt.Sprintf("deployment of version %d %s", version, status), func() (bool, string) {
			d = latest()
			if d == nil {
				return false, "no deployment"
			}
			return d.JobVersion == version && d.Status == status, fmt.Sprintf("v%d %s %q", d.JobVersion, d.Status, d.StatusDescription)
		})
		return d
	}
	run := func(name, args string) {
		t.Helper()
		if out, code := a.cli("job", "run", "-detach", write(name, webJob(bin, args))); code != 0 {
			t.Fatalf("job run %s: %d\n%s", name, code, out)
		}
	}

	run("v1.hcl", `"-version", "v1"`)
	waitDeployment(0, api.DeploymentStatusSuccessful)
	if n := healthyCount(allocs()); n != 3 {
		t.Fatalf("%d healthy after the first deployment, want 3", n)
	}

	// Version 1 rolls out while a sampler counts healthy allocations
	// every 100 ms.
	var mu sync.Mutex
	minHealthy, samples := 3, 0
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var list []*api.Allocation
			if err := fetchJSON(a.addr+"/v1/job/web/allocations", &list); err != nil {
				continue
			}
			n := healthyCount(list)
			mu.Lock()
			samples++
			minHealthy = min(minHealthy, n)
			mu.Unlock()
		}
	}()
	run("v2.hcl", `"-version", "v2"`)
	d1 := waitDeployment(1, api.DeploymentStatusSuccessful)
	waittest.For(t, 30*time.Second, "the last old allocation stopped", func() (bool, string) {
		live := 0
		for _, al := range allocs() {
			if liveAlloc(al) {
				live++
				if al.DeploymentID != d1.ID {
					return false, "an old allocation still runs"
				}
			}
		}
		return live == 3, fmt.Sprintf("%d live", live)
	})
	close(stop)
	<-sampled
	mu.Lock()
	if minHealthy < 3 || samples < 10 {
		t.Fatalf("during the rollout: at least %d healthy over %d samples, want never fewer than 3", minHealthy, samples)
	}
	t.Logf("version 1 rolled out over %d samples, never fewer than %d healthy", samples, minHealthy)
	mu.Unlock()

	// Version 2 fails its health: the deployment fails and version 1 is
	// registered again (as version 3).
	run("v3.hcl", `"-fail"`)
	waittest.For(t, 90*time.Second, "version 2's deployment failed and rolled back", func() (bool, string) {
		var ds []*api.Deployment
		a.getJSON("/v1/job/web/deployments", &ds)
		for _, d := range ds {
			if d.JobVersion == 2 {
				return d.Status == api.DeploymentStatusFailed &&
					strings.Contains(d.StatusDescription, "rolling back to job version 1"), d.Status + " " + d.StatusDescription
			}
		}
		return false, "no deployment of version 2"
	})
	waitDeployment(3, api.DeploymentStatusSuccessful)
	var job api.Job
	a.getJSON("/v1/job/web", &job)
	if job.Version != 3 || fmt.Sprint(job.TaskGroups[0].Tasks[0].Config["args"]) != "[-version v2]" {
		t.Fatalf("after the auto-revert: version %d args %v, want version 3 running v2", job.Version, job.TaskGroups[0].Tasks[0].Config["args"])
	}
	if n := healthyCount(allocs()); n < 3 {
		t.Fatalf("%d healthy after the revert, want 3", n)
	}

	out, code := a.cli("job", "history", "-p", "web")
	if code != 0 {
		t.Fatalf("job history: %d\n%s", code, out)
	}
	for _, v := range []string{"Version     = 0", "Version     = 1", "Version     = 2", "Version     = 3", `-fail`} {
		if !strings.Contains(out, v) {
			t.Fatalf("job history lacks %q:\n%s", v, out)
		}
	}
	if out, code := a.cli("deployment", "list"); code != 0 || !strings.Contains(out, "failed") || !strings.Contains(out, "successful") {
		t.Fatalf("deployment list: %d\n%s", code, out)
	}

	// job revert restores version 0's spec (as version 4).
	if out, code := a.cli("job", "revert", "-detach", "web", "0"); code != 0 {
		t.Fatalf("job revert: %d\n%s", code, out)
	}
	d4 := waitDeployment(4, api.DeploymentStatusSuccessful)
	waittest.For(t, 60*time.Second, "every live allocation runs v1 again", func() (bool, string) {
		live := 0
		for _, al := range allocs() {
			if liveAlloc(al) {
				live++
				var full api.Allocation
				if a.getJSON("/v1/allocation/"+al.ID, &full); al.DeploymentID != d4.ID || full.Job == nil ||
					fmt.Sprint(full.Job.TaskGroups[0].Tasks[0].Config["args"]) != "[-version v1]" {
					return false, "an allocation runs another version"
				}
			}
		}
		return live == 3, fmt.Sprintf("%d live", live)
	})
	if out, code := a.cli("deployment", "status", latest().ID); code != 0 || !strings.Contains(out, "successful") {
		t.Fatalf("deployment status: %d\n%s", code, out)
	}
}
