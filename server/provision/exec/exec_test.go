package exec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/structs"
)

// script returns the absolute path of testdata/name.
func script(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newProvider(t *testing.T, pc map[string]string) *Provider {
	t.Helper()
	p, err := FromPoolConfig(pc, nil)
	if err != nil {
		t.Fatalf("FromPoolConfig(%v): %v", pc, err)
	}
	return p
}

func createReq(key, name string) provision.CreateRequest {
	return provision.CreateRequest{
		Pool: "gpu", IdempotencyKey: key, NodeName: name,
		Shape: structs.NodeShape{NodeClass: "a100", GPUModel: "NVIDIA A100-SXM4-80GB", GPUCount: 2, GPUMemoryMB: 81920},
		Join:  provision.JoinInfo{Servers: []string{"10.0.0.1:4656"}, Token: "join-secret", Region: "global", Datacenter: "dc1"},
	}
}

// TestGoodProgram runs the full protocol against a program that keeps its
// hosts in files: two creates, a repeated create with the same key (the
// same host), list, terminate twice (the second of a gone host succeeds),
// and checks what the program was given: the request's fields, the join
// token, config values passed literally, and a minimal environment
// without the server's variables.
func TestGoodProgram(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GPULAYER_TOKEN", "server-secret")
	t.Setenv("PROVIDER_TEST_REGION", "lab-1")
	t.Setenv("PROVIDER_TEST_HIDDEN", "hidden")
	marker := filepath.Join(dir, "injected")
	p := newProvider(t, map[string]string{
		KeyCommand: script(t, "good.sh"), KeyTimeout: "20s", KeyPassEnv: "PROVIDER_TEST_REGION",
		"state_dir": dir, "note": "$(touch " + marker + "); touch " + marker,
	})
	ctx := context.Background()

	h1, err := p.Create(ctx, createReq("key-a", "gpu-a"))
	if err != nil {
		t.Fatal(err)
	}
	want := provision.Host{ID: "host-1", Pool: "gpu", IdempotencyKey: "key-a", NodeName: "gpu-a", State: "running"}
	if h1 != want {
		t.Fatalf("create: %+v, want %+v", h1, want)
	}
	h2, err := p.Create(ctx, createReq("key-b", "gpu-b"))
	if err != nil || h2.ID != "host-2" {
		t.Fatalf("second create: %+v, %v", h2, err)
	}
	again, err := p.Create(ctx, createReq("key-a", "gpu-a"))
	if err != nil || again != h1 {
		t.Fatalf("create with the same key: %+v, %v; want %+v", again, err, h1)
	}

	var in CreateRequest
	b, err := os.ReadFile(filepath.Join(dir, "stdin.create"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	if in.Protocol != ProtocolVersion || in.Op != OpCreate || in.Pool != "gpu" || in.IdempotencyKey != "key-a" || in.NodeName != "gpu-a" ||
		in.Shape.GPUCount != 2 || in.Shape.NodeClass != "a100" || in.Join.Token != "join-secret" || in.Join.Servers[0] != "10.0.0.1:4656" ||
		in.Config["note"] == "" || in.Config[KeyCommand] != "" {
		t.Errorf("create request: %+v", in)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a config value was run by a shell")
	}
	env, err := os.ReadFile(filepath.Join(dir, "env.create"))
	if err != nil {
		t.Fatal(err)
	}
	es := string(env)
	for _, w := range []string{"PROVIDER_TEST_REGION=lab-1", "GPULAYER_PROVIDER_OP=create", "GPULAYER_PROVIDER_PROTOCOL=1", "PATH="} {
		if !strings.Contains(es, w) {
			t.Errorf("environment lacks %q:\n%s", w, es)
		}
	}
	for _, w := range []string{"server-secret", "PROVIDER_TEST_HIDDEN"} {
		if strings.Contains(es, w) {
			t.Errorf("environment holds %q:\n%s", w, es)
		}
	}

	hosts, err := p.List(ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 2 || hosts[0].IdempotencyKey == "" || hosts[0].Pool != "gpu" {
		t.Fatalf("list: %+v", hosts)
	}
	if err := p.Terminate(ctx, "gpu", "host-1"); err != nil {
		t.Fatal(err)
	}
	if err := p.Terminate(ctx, "gpu", "host-1"); err != nil {
		t.Fatalf("terminate of a gone host: %v", err)
	}
	hosts, err = p.List(ctx, "gpu")
	if err != nil || len(hosts) != 1 || hosts[0].ID != "host-2" {
		t.Fatalf("list after terminate: %+v, %v", hosts, err)
	}
}

// TestFailingProgram: a non-zero exit is ErrCommandFailed with the exit
// status and the tail of stderr.
func TestFailingProgram(t *testing.T) {
	p := newProvider(t, map[string]string{KeyCommand: script(t, "fail.sh")})
	_, err := p.Create(context.Background(), createReq("k", "n"))
	if !errors.Is(err, ErrCommandFailed) {
		t.Fatalf("err = %v, want ErrCommandFailed", err)
	}
	for _, w := range []string{"exit status 1", "quota exceeded for instance type gpu-1", "fail.sh create"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if err := p.Terminate(context.Background(), "gpu", "x"); !errors.Is(err, ErrCommandFailed) {
		t.Errorf("terminate: %v", err)
	}
	if _, err := p.List(context.Background(), "gpu"); !errors.Is(err, ErrCommandFailed) {
		t.Errorf("list: %v", err)
	}
}

// TestBadOutput: each kind of broken answer is ErrBadOutput naming the
// field or offset.
func TestBadOutput(t *testing.T) {
	for _, tc := range []struct {
		mode, op, want string
	}{
		{"type", OpCreate, `field "id": a JSON number where string belongs`},
		{"syntax", OpList, "invalid JSON at offset"},
		{"cut", OpCreate, "cut short at offset"},
		{"unknown", OpCreate, `unknown field "nodename"`},
		{"trailing", OpCreate, "trailing data after the JSON object"},
		{"array", OpCreate, `must be one JSON object, it starts with "["`},
		{"empty", OpTerminate, "stdout is empty"},
		{"noid", OpCreate, "id: required"},
		{"control", OpCreate, "control characters"},
		{"otherkey", OpCreate, `idempotency_key: the answer is for key "someone-else"`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			p := newProvider(t, map[string]string{KeyCommand: script(t, "badjson.sh"), "mode": tc.mode})
			var err error
			switch tc.op {
			case OpCreate:
				_, err = p.Create(context.Background(), createReq("k", "n"))
			case OpList:
				_, err = p.List(context.Background(), "gpu")
			case OpTerminate:
				err = p.Terminate(context.Background(), "gpu", "h")
			}
			if !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBadOutput with %q", err, tc.want)
			}
		})
	}
}

// TestDeadlineKillsGroup: a program that sleeps past its timeout is
// killed with its whole process group (its background child too), and
// the error says so.
func TestDeadlineKillsGroup(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, map[string]string{KeyCommand: script(t, "sleep.sh"), KeyTimeout: "1s", "state_dir": dir})
	start := time.Now()
	_, err := p.Create(context.Background(), createReq("k", "n"))
	if !errors.Is(err, ErrCommandFailed) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "process group") {
		t.Fatalf("err = %v, want ErrCommandFailed and DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "this takes a while") {
		t.Errorf("error %q lacks the stderr tail", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("returned after %s", d)
	}
	b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The group was killed before Create returned; a zombie is reaped by
	// init, so poll briefly for the pid to be gone.
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && !isZombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("background child %d outlived the deadline", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// isZombie reports whether pid has exited and waits for its parent.
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// TestCallerDeadline: the caller's ctx deadline applies when it is
// shorter than the config's timeout.
func TestCallerDeadline(t *testing.T) {
	p := newProvider(t, map[string]string{KeyCommand: script(t, "sleep.sh"), KeyTimeout: "5m", "state_dir": t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := p.List(ctx, "gpu"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
}

// TestHugeOutput: stdout past MaxStdout kills the program at once (not at
// the deadline) and fails with ErrBadOutput.
func TestHugeOutput(t *testing.T) {
	p := newProvider(t, map[string]string{KeyCommand: script(t, "huge.sh"), KeyTimeout: "5m"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.List(ctx, "gpu")
	if !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), "stdout exceeds 1048576 bytes") {
		t.Fatalf("err = %v, want ErrBadOutput for the size", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the call ran to the caller's deadline instead of stopping at the limit")
	}
}

// TestParseConfig: each bad key is refused, naming it.
func TestParseConfig(t *testing.T) {
	good := script(t, "good.sh")
	notExec := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pc   map[string]string
		want string
	}{
		{"no command", map[string]string{}, "command: required"},
		{"relative", map[string]string{KeyCommand: "testdata/good.sh"}, "clean absolute path"},
		{"unclean", map[string]string{KeyCommand: filepath.Dir(good) + "/../testdata/good.sh"}, "clean absolute path"},
		{"missing", map[string]string{KeyCommand: "/nonexistent/provider"}, "no such file"},
		{"not executable", map[string]string{KeyCommand: notExec}, "not an executable file"},
		{"directory", map[string]string{KeyCommand: filepath.Dir(good)}, "not an executable file"},
		{"bad timeout", map[string]string{KeyCommand: good, KeyTimeout: "soon"}, "timeout: \"soon\" is not a duration"},
		{"short timeout", map[string]string{KeyCommand: good, KeyTimeout: "10ms"}, "outside 1s to 30m0s"},
		{"long timeout", map[string]string{KeyCommand: good, KeyTimeout: "2h"}, "outside 1s to 30m0s"},
		{"secret env", map[string]string{KeyCommand: good, KeyPassEnv: "HOME,GPULAYER_TOKEN"}, "GPULAYER_TOKEN"},
		{"nomad env", map[string]string{KeyCommand: good, KeyPassEnv: "nomad_token"}, "nomad_token"},
		{"bad env name", map[string]string{KeyCommand: good, KeyPassEnv: "A=B"}, `"A=B" is not an environment variable name`},
		{"long value", map[string]string{KeyCommand: good, "x": strings.Repeat("v", maxConfigValueLen+1)}, "x: value of 4097 bytes"},
		{"control key", map[string]string{KeyCommand: good, "a\nb": "v"}, "printable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromPoolConfig(tc.pc, nil)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig with %q", err, tc.want)
			}
		})
	}
	p, err := FromPoolConfig(map[string]string{KeyCommand: good}, nil)
	if err != nil || p.cfg.Timeout != DefaultTimeout || p.Name() != Name {
		t.Fatalf("defaults: %+v, %v", p, err)
	}
}

// TestTailBuffer keeps the last bytes across writes of every size.
func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 8}
	for _, w := range []string{"abc", "defgh", "ij", "0123456789", "k"} {
		_, _ = b.Write([]byte(w))
	}
	if got := b.String(); got != "3456789k" {
		t.Fatalf("tail = %q", got)
	}
}

// TestCommandReplaceableByOthersRefused proves the provider refuses to run
// a program another user could swap between the check and the exec: a
// world-writable file, one in a world-writable (not sticky) directory, and
// a symlink placed in such a directory (its target can be changed at
// will); a symlink in a safe directory to a safe file is run.
func TestCommandReplaceableByOthersRefused(t *testing.T) {
	good := script(t, "good.sh")
	root := t.TempDir()
	open := filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	inOpen := filepath.Join(open, "prov.sh")
	worldFile := filepath.Join(root, "world.sh")
	for _, p := range []string{inOpen, worldFile} {
		if err := os.WriteFile(p, body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(worldFile, 0o777); err != nil {
		t.Fatal(err)
	}
	linkInOpen := filepath.Join(open, "link")
	if err := os.Symlink(good, linkInOpen); err != nil {
		t.Fatal(err)
	}
	safeLink := filepath.Join(root, "safe-link")
	if err := os.Symlink(good, safeLink); err != nil {
		t.Fatal(err)
	}
	for name, cmd := range map[string]string{"world-writable file": worldFile, "file in world-writable dir": inOpen,
		"symlink in world-writable dir": linkInOpen} {
		_, err := ParseConfig(map[string]string{KeyCommand: cmd})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "writable by any user") {
			t.Errorf("%s: ParseConfig = %v, want ErrConfig: writable by any user", name, err)
		}
	}
	// The check runs again at each call: a program made replaceable
	// after the provider was built is not run.
	p := newProvider(t, map[string]string{KeyCommand: safeLink, "state_dir": t.TempDir()})
	if _, err := p.List(context.Background(), "gpu"); err != nil {
		t.Fatalf("safe symlink: %v", err)
	}
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := p.List(context.Background(), "gpu"); !errors.Is(err, ErrConfig) {
		t.Fatalf("after its directory became world-writable: %v", err)
	}
}
