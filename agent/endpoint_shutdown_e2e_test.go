package agent_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
)

// TestE2EEndpointShutdownDelayFinishesStream: with a group
// shutdown_delay, stopping an endpoint's job takes its members out of the
// router's rotation at once but lets a streaming answer already in flight
// run to its end before the member is sent SIGTERM (the model server
// closes its connections on SIGTERM, so without the delay the stream is
// cut, as TestE2EEndpointNativeMembers shows for a kill).
func TestE2EEndpointShutdownDelayFinishesStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	binDir := taskUserDir(t)
	bin := modelServer(t, binDir, "a")
	a := startServicesAgent(t, taskUserDir(t))
	epPort := freePort(t)
	src := strings.Replace(endpointJobHCL(bin, 2, epPort), "    count = 2\n", "    count = 2\n    shutdown_delay = \"6s\"\n", 1)
	if !strings.Contains(src, "shutdown_delay") {
		t.Fatal("the job lacks its shutdown_delay")
	}
	jobFile := filepath.Join(t.TempDir(), "ep.hcl")
	if err := os.WriteFile(jobFile, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := a.cli("job", "run", "-detach", jobFile); code != 0 {
		t.Fatalf("job run exited %d:\n%s\nagent log:\n%s", code, out, a.logText())
	}
	waittest.For(t, 60*time.Second, "2 admitted members", func() (bool, string) {
		all := a.endpointAllocs("ep")
		live := liveAllocs(all)
		return len(live) == 2 && admittedCount(live) == 2, describeAllocs(all)
	})

	// 40 events 50 ms apart: a 2 s answer, stopped after its first event.
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/v1/slow?chunks=40&interval_ms=50", epPort), nil)
	req.Header.Set("X-Request-Id", "slow-drain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: 0 ") {
		t.Fatalf("first event %q: %v", line, err)
	}
	if out, code := a.cli("job", "stop", "-detach", "ep"); code != 0 {
		t.Fatalf("job stop exited %d:\n%s", code, out)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("the in-flight stream was cut after the job stop (%d more bytes): %v", len(rest), err)
	}
	if n := strings.Count(string(rest), "data: "); n != 39 {
		t.Fatalf("the stream ended with %d more events, want 39", n)
	}
	// The members wait out the delay, saying so, then stop.
	waittest.For(t, 60*time.Second, "both members stopped after their shutdown delay", func() (bool, string) {
		all := a.endpointAllocs("ep")
		done := 0
		for _, al := range all {
			if al.ClientStatus != "complete" {
				continue
			}
			if !hasTaskEvent(al, "server", "Waiting for shutdown delay") {
				return false, fmt.Sprintf("allocation %s complete without a shutdown delay event: %s", al.ID[:8], describeAllocs(all))
			}
			done++
		}
		return done == 2, describeAllocs(all)
	})
}

// hasTaskEvent reports whether task of al has an event of type typ.
func hasTaskEvent(al *api.Allocation, task, typ string) bool {
	ts := al.TaskStates[task]
	if ts == nil {
		return false
	}
	for _, e := range ts.Events {
		if e.Type == typ {
			return true
		}
	}
	return false
}
