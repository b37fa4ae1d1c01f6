package agent_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
)

// rollingServiceJobHCL is service "web" at count 3 whose instances are
// judged healthy by their check (health_check = "checks"), rolled out one
// new copy at a time before an old one stops, and reverted automatically.
// fail makes the server's /health answer 500.
func rollingServiceJobHCL(bin, version string, fail bool) string {
	failEnv := "0"
	if fail {
		failEnv = "1"
	}
	return fmt.Sprintf(`job "web" {
  type = "service"
  group "api" {
    count = 3
    update {
      max_parallel      = 1
      health_check      = "checks"
      min_healthy_time  = "1s"
      healthy_deadline  = "10s"
      progress_deadline = "1m"
      auto_revert       = true
      max_unavailable   = 0
    }
    network {
      port "http" {}
    }
    service {
      name = "web"
      port = "http"
      tags = [%q]
      check {
        type     = "http"
        path     = "/health"
        interval = "200ms"
        timeout  = "1s"
      }
    }
    task "server" {
      driver = "native"
      config {
        command = %q
      }
      env {
        VERSION     = %q
        HEALTH_FAIL = %q
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
`, version, bin, version, failEnv)
}

// getJSONQuiet GETs url into out without failing the test (for a sampler
// goroutine).
func getJSONQuiet(url string, out interface{}) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// TestE2EServicesRollingDeployment is issue 13's "must show 2" with
// service checks: web at v1 with count 3; v2 rolls out one at a time with
// never fewer than 3 healthy instances, sampled every 100 ms from
// /v1/service/web; v3, whose check fails, is reverted to v2
// automatically; job history shows the versions and job revert restores
// v1. Deployment health is health_check = "checks", answered by the
// client's check runner (client.Config.ChecksHealth defaults to the client
// itself): without it v3 would be judged healthy by its task states and
// never reverted.
func TestE2EServicesRollingDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	bin := healthServer(t)
	a := startServicesAgent(t, taskUserDir(t))
	dir := t.TempDir()
	run := func(version string, fail bool) {
		t.Helper()
		p := filepath.Join(dir, version+".hcl")
		if err := os.WriteFile(p, []byte(rollingServiceJobHCL(bin, version, fail)), 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := a.cli("job", "run", "-detach", p)
		if code != 0 {
			t.Fatalf("job run %s: %d\n%s", version, code, out)
		}
	}
	// instances returns the registered instances by the version each
	// answers with (its tag).
	instances := func() map[string]int {
		var regs []*api.ServiceRegistration
		if err := getJSONQuiet(a.addr+"/v1/service/web", &regs); err != nil {
			return nil
		}
		out := map[string]int{}
		for _, r := range regs {
			out[strings.Join(r.Tags, ",")]++
		}
		return out
	}
	deployment := func(version uint64) (status, desc string) {
		var ds []map[string]interface{}
		if code := a.getJSON("/v1/job/web/deployments", &ds); code != 200 {
			return "", fmt.Sprintf("deployments: %d", code)
		}
		for _, d := range ds {
			if v, _ := d["JobVersion"].(float64); uint64(v) == version {
				s, _ := d["Status"].(string)
				sd, _ := d["StatusDescription"].(string)
				return s, sd
			}
		}
		return "", "no deployment"
	}
	waitVersion := func(tag string, jobVersion uint64) {
		t.Helper()
		waittest.For(t, 90*time.Second, fmt.Sprintf("3 healthy %s instances, deployment of version %d successful", tag, jobVersion), func() (bool, string) {
			got := instances()
			st, desc := deployment(jobVersion)
			return got[tag] == 3 && len(got) == 1 && st == "successful", fmt.Sprintf("instances %v, deployment %s %s", got, st, desc)
		})
	}

	run("v1", false)
	waitVersion("v1", 0)

	// v2 rolls out while a sampler counts healthy instances every 100 ms.
	var mu sync.Mutex
	minHealthy, samples := 3, 0
	stop, sampled := make(chan struct{}), make(chan struct{})
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
			got := instances()
			if got == nil {
				continue
			}
			n := 0
			for _, c := range got {
				n += c
			}
			mu.Lock()
			samples++
			minHealthy = min(minHealthy, n)
			mu.Unlock()
		}
	}()
	run("v2", false)
	waitVersion("v2", 1)
	close(stop)
	<-sampled
	mu.Lock()
	if minHealthy < 3 || samples < 10 {
		t.Fatalf("during the rollout: at least %d healthy instances over %d samples, want never fewer than 3", minHealthy, samples)
	}
	t.Logf("v2 rolled out over %d samples of /v1/service/web, never fewer than %d healthy", samples, minHealthy)
	mu.Unlock()

	// v3's check fails: its deployment fails and v2 comes back (as job
	// version 3); the v2 instances stay registered throughout.
	run("v3", true)
	waittest.For(t, 90*time.Second, "v3's deployment failed and rolled back", func() (bool, string) {
		st, desc := deployment(2)
		return st == "failed" && strings.Contains(desc, "rolling back"), st + " " + desc
	})
	waitVersion("v2", 3)

	out, code := a.cli("job", "history", "web")
	if code != 0 {
		t.Fatalf("job history: %d\n%s", code, out)
	}
	for _, v := range []string{"Version     = 0", "Version     = 1", "Version     = 2", "Version     = 3"} {
		if !strings.Contains(out, v) {
			t.Fatalf("job history lacks %q:\n%s", v, out)
		}
	}
	// job revert restores v1 (as job version 4).
	if out, code := a.cli("job", "revert", "-detach", "web", "0"); code != 0 {
		t.Fatalf("job revert: %d\n%s", code, out)
	}
	waitVersion("v1", 4)
}
