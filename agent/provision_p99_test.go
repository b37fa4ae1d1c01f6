package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/internal/porttest"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/go-hclog"
)

// slowCreateScript is an exec provider program whose create takes 30 s.
const slowCreateScript = `#!/bin/sh
op="$1"
in=$(cat)
field() { printf '%s' "$in" | sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
case "$op" in
create)
	sleep 30
	printf '{"id":"h-%s","node_name":"%s","state":"running"}\n' "$(field idempotency_key)" "$(field node_name)"
	;;
terminate) echo '{}' ;;
list) echo '{"hosts":[]}' ;;
*) exit 2 ;;
esac
`

// TestProvisionSlowProviderAPIP99 (Must show 2) measures PUT /v1/jobs
// latency on one server, first with no pool to provision, then while an
// exec provider's 8 creates each sleep 30 s, in the same run, and
// reports both p99s. It is a measurement, not a timing assertion: it runs
// only with GPULAYER_PROVISION_P99=1.
func TestProvisionSlowProviderAPIP99(t *testing.T) {
	if os.Getenv("GPULAYER_PROVISION_P99") != "1" {
		t.Skip("a measurement: set GPULAYER_PROVISION_P99=1 to run it")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "slow.sh")
	if err := os.WriteFile(script, []byte(slowCreateScript), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := agent.DefaultConfig()
	cfg.Name = "p99-server"
	cfg.Server.Enabled = true
	// The pool names the script; the server's own config must allow it.
	cfg.Server.ProvisionExecCommands = []string{script}
	cfg.BindAddr = "127.0.0.1"
	cfg.DataDir = filepath.Join(dir, "data")
	off := false
	cfg.ACL = &agent.ACLConfig{Enabled: &off}
	cfg.Ports.HTTP, cfg.Ports.Raft, cfg.Ports.Serf = porttest.Take(t), porttest.Take(t), porttest.Take(t)
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Name: cfg.Name, Level: hclog.Warn, Output: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	base := "http://" + a.HTTPAddr()
	client := &http.Client{Timeout: 30 * time.Second}
	put := func(path string, body any) (time.Duration, int) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPut, base+path, bytes.NewReader(b))
		start := time.Now()
		resp, err := client.Do(req)
		d := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return d, resp.StatusCode
	}
	const n = 1000
	measure := func(phase string) time.Duration {
		lat := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			job := map[string]any{"ID": fmt.Sprintf("%s-%d", phase, i), "Type": "batch",
				"TaskGroups": []any{map[string]any{"Name": "g", "Count": 1,
					"Tasks": []any{map[string]any{"Name": "t", "Driver": "native", "Config": map[string]any{"command": "/bin/true"},
						"Resources": map[string]any{"CPU": 100, "MemoryMB": 32}}}}}}
			d, code := put("/v1/jobs", map[string]any{"Job": job})
			if code != http.StatusOK {
				t.Fatalf("PUT /v1/jobs = %d", code)
			}
			lat = append(lat, d)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		p50, p99 := lat[n/2], lat[n*99/100]
		t.Logf("%s: PUT /v1/jobs x%d: p50 %s p99 %s max %s", phase, n, p50, p99, lat[n-1])
		return p99
	}
	waittest.NoErr(t, 30*time.Second, "leader", func() (bool, error) {
		resp, err := client.Get(base + "/v1/status/leader")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == 200, nil
	})
	measure("warm-up") // not compared: the first requests pay for cold caches
	p99Off := measure("provisioning-off")

	pool := map[string]any{"NodePools": []any{map[string]any{"Name": "slow", "Scaling": map[string]any{
		"Provider": "exec", "Min": 8, "Max": 8, "ProviderConfig": map[string]string{"command": script, "timeout": "2m"},
		"Shape": map[string]any{"GPUCount": 1}, "Idle": map[string]any{"NoAllocations": true}}}}}
	if _, code := put("/v1/node/pools", pool); code != http.StatusOK {
		t.Fatalf("apply pool = %d", code)
	}
	started := time.Now()
	waittest.For(t, 30*time.Second, "8 creates in flight", func() (bool, string) {
		resp, err := client.Get(base + "/v1/node/pool/slow/status")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var st api.NodePoolStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return false, err.Error()
		}
		return len(st.Pending) == 8, fmt.Sprintf("pending %d", len(st.Pending))
	})
	p99On := measure("provisioning-on")
	elapsed := time.Since(started)
	t.Logf("p99 during provisioning / p99 off = %.2f (the creates were in flight for the whole run: %s < 30s: %v)",
		float64(p99On)/float64(p99Off), elapsed.Round(time.Millisecond), elapsed < 30*time.Second)
}
