package agent_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dockerAvailable returns nil when the docker CLI is installed and its
// engine answers.
func dockerAvailable() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("docker CLI not found: %w", err)
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Errorf("docker engine not reachable: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// requireDocker skips the test when Docker is missing, or fails it when
// CI=true (CI must run it).
func requireDocker(t *testing.T) {
	t.Helper()
	if err := dockerAvailable(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

// docker runs the docker CLI and returns its trimmed stdout; a failure
// fails the test with the command's output.
func docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := dockerTry(args...)
	if err != nil {
		t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func dockerTry(args ...string) (string, error) {
	cmd := exec.Command("docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// buildScratchImage builds the static binary (CGO_ENABLED=0) and an image
// FROM scratch holding only it, tagged tag; the image is removed at the
// end of the test.
func buildScratchImage(t *testing.T, tag string) {
	t.Helper()
	skipChildProcessesUnderRace(t)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "gpulayer"), ".")
	build.Dir = repoRoot(t)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	dockerfile := "FROM scratch\nCOPY gpulayer /gpulayer\nENTRYPOINT [\"/gpulayer\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o600); err != nil {
		t.Fatal(err)
	}
	docker(t, "build", "-q", "-t", tag, dir)
	t.Cleanup(func() { _, _ = dockerTry("rmi", "-f", tag) })
}

// createNetwork creates a bridge network on a random 10.x.y.0/24 subnet
// (retrying on a taken subnet), removed at the end of the test, and
// returns the subnet's first three octets.
func createNetwork(t *testing.T, name string) string {
	t.Helper()
	var lastErr error
	for i := 0; i < 10; i++ {
		prefix := fmt.Sprintf("10.%d.%d", 200+rand.IntN(50), rand.IntN(256))
		_, err := dockerTry("network", "create", "--driver", "bridge", "--subnet", prefix+".0/24", name)
		if err == nil {
			t.Cleanup(func() { _, _ = dockerTry("network", "rm", name) })
			return prefix
		}
		lastErr = err
	}
	t.Fatalf("docker network create %s: %v", name, lastErr)
	return ""
}

// TestDockerPartition runs three servers (gossip encrypted) in containers
// from an image built FROM scratch with the static binary. Each container
// has two networks: "raft" carries Raft and gossip (-bind), "ctl" only the
// test's HTTP requests (-http-bind=0.0.0.0). Disconnecting the leader from
// "raft" cuts it off: a write sent to it is not acknowledged, the two
// others elect a leader and keep accepting jobs (sent to both, the
// follower forwarding), and after the cut-off server reconnects it catches
// up to the same state hash, without the write it was sent alone.
func TestDockerPartition(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds an image and runs three containers (skipped under -short and -race)")
	}
	requireDocker(t)
	suffix := fmt.Sprintf("%d-%d", os.Getpid(), rand.IntN(1e6))
	tag := "gpulayer-ha-test:" + suffix
	buildScratchImage(t, tag)
	raftNet, ctlNet := "gl-raft-"+suffix, "gl-ctl-"+suffix
	raftPrefix := createNetwork(t, raftNet)
	ctlPrefix := createNetwork(t, ctlNet)

	key := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%032d", rand.IntN(1e9))))
	c := &testCluster{t: t, http: &http.Client{Timeout: 10 * time.Second}}
	var names []string
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("gl-%s-%d", suffix, i)
		raftIP, ctlIP := fmt.Sprintf("%s.%d", raftPrefix, 10+i), fmt.Sprintf("%s.%d", ctlPrefix, 10+i)
		args := []string{"create", "--name", name, "--network", ctlNet, "--ip", ctlIP, tag,
			"agent", "-server", "-bootstrap-expect=3", "-data-dir=/data", "-bind=" + raftIP, "-http-bind=0.0.0.0",
			fmt.Sprintf("-node=server%d", i), "-encrypt=" + key, "-log-level=DEBUG",
			// This test is about partitions, not tokens: ACLs off, said so.
			"-acl-enabled=false"}
		for j := 0; j < 3; j++ {
			if j != i {
				args = append(args, fmt.Sprintf("-retry-join=%s.%d", raftPrefix, 10+j))
			}
		}
		docker(t, args...)
		t.Cleanup(func() {
			if t.Failed() {
				logs, _ := exec.Command("docker", "logs", "--tail", "200", name).CombinedOutput()
				t.Logf("---- %s log ----\n%s", name, logs)
			}
			_, _ = dockerTry("rm", "-f", name)
		})
		docker(t, "network", "connect", "--ip", raftIP, raftNet, name)
		docker(t, "start", name)
		names = append(names, name)
		c.servers = append(c.servers, &proc{t: t, name: fmt.Sprintf("server%d", i), external: true,
			httpAddr: ctlIP + ":4656", raftAddr: raftIP + ":4657"})
	}
	leader := c.waitStable(90 * time.Second)
	if code, body := putJSON(t, leader.url()+"/v1/jobs", dockerJob("before-cut"), ""); code != 200 {
		t.Fatalf("write before the cut: %d %s", code, body)
	}
	c.waitSameState(30 * time.Second)

	// Cut the leader off: it is the one that could still believe it may
	// commit.
	victim := leader
	vi := -1
	for i, p := range c.servers {
		if p == victim {
			vi = i
		}
	}
	docker(t, "network", "disconnect", raftNet, names[vi])
	cutAt := time.Now()
	victim.external = false // not part of the majority's checks

	// The minority cannot commit: a write sent to it is not acknowledged.
	slow := &http.Client{Timeout: 20 * time.Second}
	code, body := putJSONWith(slow, victim.url()+"/v1/jobs", dockerJob("minority-write"))
	if code == http.StatusOK {
		t.Fatalf("the cut-off server acknowledged a write: %s", body)
	}
	t.Logf("write to the cut-off server: %d %s after %s", code, body, time.Since(cutAt).Round(time.Millisecond))

	// The majority elects a leader and keeps accepting jobs.
	majority := &testCluster{t: t, http: c.http}
	for _, p := range c.servers {
		if p != victim {
			majority.servers = append(majority.servers, p)
		}
	}
	var newLeader *proc
	waittest.For(t, 60*time.Second, "a leader among the majority", func() (bool, string) {
		newLeader = majority.leader()
		return newLeader != nil, "none yet"
	})
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("majority-%d", i)
		waittest.For(t, 30*time.Second, "the majority accepting "+id, func() (bool, string) {
			// Alternate between the two: a follower forwards to the leader.
			p := majority.servers[i%len(majority.servers)]
			code, body := putJSON(t, p.url()+"/v1/jobs", dockerJob(id), "")
			return code == 200, fmt.Sprintf("%d %s", code, body)
		})
	}
	t.Logf("majority (leader %s) accepted 10 jobs, sent to both servers, %s after the cut", newLeader.name, time.Since(cutAt).Round(time.Millisecond))

	// Reconnect: the cut-off server catches up to the same state.
	docker(t, "network", "connect", "--ip", victim.raftAddr[:strings.LastIndex(victim.raftAddr, ":")], raftNet, names[vi])
	victim.external = true
	healed := time.Now()
	hash := c.waitSameState(90 * time.Second)
	t.Logf("after reconnect every server has state %s (caught up in %s)", hash, time.Since(healed).Round(time.Millisecond))
	for _, p := range c.servers {
		var jobs []struct{ ID string }
		if err := c.get(p, "/v1/jobs", &jobs); err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, j := range jobs {
			ids[j.ID] = true
		}
		if len(ids) != 11 || !ids["before-cut"] || !ids["majority-9"] || ids["minority-write"] {
			t.Errorf("%s has jobs %v, want before-cut and majority-0..9 only", p.name, ids)
		}
	}
}

// dockerJob is a batch job with no GPU; no client runs in the Docker
// test, so it only exercises the servers' writes.
func dockerJob(id string) map[string]interface{} {
	return map[string]interface{}{"Job": map[string]interface{}{
		"ID": id, "Type": "batch",
		"TaskGroups": []interface{}{map[string]interface{}{"Name": "g", "Count": 1, "Tasks": []interface{}{map[string]interface{}{
			"Name": "t", "Driver": "native", "Config": map[string]interface{}{"command": "/bin/true"},
			"Resources": map[string]interface{}{"CPU": 10, "MemoryMB": 8},
		}}}},
	}}
}

func putJSONWith(hc *http.Client, url string, v interface{}) (int, string) {
	b, _ := json.Marshal(v)
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(b))
	if err != nil {
		return 0, err.Error()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
