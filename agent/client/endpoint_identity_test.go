package client

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

func writeExec(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func nativeMember(name, exe string, cfg map[string]interface{}, env map[string]string) memberTask {
	return memberTask{
		task:   &structs.Task{Name: name, Driver: "native", Config: cfg, Env: env},
		status: &driver.TaskStatus{State: driver.TaskStateRunning, Executable: exe},
	}
}

// TestEndpointIdentityDigests: the same binary (also copied to another
// path) gives the same artifact digest, a different binary another one;
// the config digest follows the driver config and the declared env only;
// the job version is the allocation's.
func TestEndpointIdentityDigests(t *testing.T) {
	dir := t.TempDir()
	a1 := writeExec(t, dir, "server-a", "#!/bin/sh\necho a\n")
	a2 := writeExec(t, t.TempDir(), "server-a-copy", "#!/bin/sh\necho a\n")
	b := writeExec(t, dir, "server-b", "#!/bin/sh\necho b\n")
	cfg := map[string]interface{}{"command": "server", "args": []interface{}{"-port", "${NOMAD_PORT_http}"}}
	env := map[string]string{"MODEL": "m1"}
	alloc := &structs.Allocation{ID: "a", Job: &structs.Job{Version: 3}}
	cache := &fileDigestCache{}

	id := func(tasks ...memberTask) structs.EndpointIdentity {
		t.Helper()
		got, err := endpointIdentity(alloc, "", tasks, cache)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	base := id(nativeMember("srv", a1, cfg, env))
	if base.JobVersion != 3 || len(base.ArtifactDigest) != 64 || len(base.ConfigDigest) != 64 {
		t.Fatalf("identity = %+v", base)
	}
	if got := id(nativeMember("srv", a1, cfg, env)); got != base {
		t.Fatalf("same binary and config: %+v != %+v", got, base)
	}
	if got := id(nativeMember("srv", a2, cfg, env)); got.ArtifactDigest != base.ArtifactDigest {
		t.Fatalf("same bytes at another path: artifact %s != %s", got.ArtifactDigest, base.ArtifactDigest)
	}
	if got := id(nativeMember("srv", b, cfg, env)); got.ArtifactDigest == base.ArtifactDigest {
		t.Fatal("a different binary has the same artifact digest")
	}
	// The copy is cached by file identity; a rewrite (new size) is read again.
	if err := os.WriteFile(a2, []byte("#!/bin/sh\necho changed\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := id(nativeMember("srv", a2, cfg, env)); got.ArtifactDigest == base.ArtifactDigest {
		t.Fatal("a rewritten binary kept its old digest")
	}
	otherArgs := map[string]interface{}{"command": "server", "args": []interface{}{"-port", "9"}}
	if got := id(nativeMember("srv", a1, otherArgs, env)); got.ConfigDigest == base.ConfigDigest || got.ArtifactDigest != base.ArtifactDigest {
		t.Fatalf("other args: %+v vs %+v", got, base)
	}
	if got := id(nativeMember("srv", a1, cfg, map[string]string{"MODEL": "m2"})); got.ConfigDigest == base.ConfigDigest {
		t.Fatal("another env has the same config digest")
	}
	// Map order never matters: the same keys built in another order.
	cfg2 := map[string]interface{}{}
	cfg2["args"] = []interface{}{"-port", "${NOMAD_PORT_http}"}
	cfg2["command"] = "server"
	if got := id(nativeMember("srv", a1, cfg2, map[string]string{"MODEL": "m1"})); got != base {
		t.Fatalf("same config built in another order: %+v != %+v", got, base)
	}
	// Docker: the resolved image ID is the artifact digest.
	dk := memberTask{task: &structs.Task{Name: "web", Driver: "docker", Config: map[string]interface{}{"image": "llm:1"}},
		status: &driver.TaskStatus{State: driver.TaskStateRunning, ImageID: "sha256:abc"}}
	if got := id(dk); got.ArtifactDigest != "sha256:abc" {
		t.Fatalf("docker artifact digest = %q", got.ArtifactDigest)
	}
	// Two tasks: one digest over both, which changes with either.
	two := id(nativeMember("srv", a1, cfg, env), dk)
	if two.ArtifactDigest == base.ArtifactDigest || len(two.ArtifactDigest) != 64 {
		t.Fatalf("two tasks: %+v", two)
	}
	if got := id(dk, nativeMember("srv", a1, cfg, env)); got != two {
		t.Fatal("task order changed the identity")
	}
}

// TestEndpointIdentityRefusals: no identity for a task that does not run,
// a driver that reports nothing, a missing file or a FIFO, or a binary
// beneath the allocation directory that is a symlink out of it.
func TestEndpointIdentityRefusals(t *testing.T) {
	allocDir := t.TempDir()
	outside := writeExec(t, t.TempDir(), "outside", "#!/bin/sh\n")
	if err := os.MkdirAll(filepath.Join(allocDir, "srv", "local"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(allocDir, "srv", "local", "server")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skip("no mkfifo:", err)
	}
	alloc := &structs.Allocation{ID: "a", Job: &structs.Job{}}
	cases := map[string]memberTask{
		"not running": {task: &structs.Task{Name: "srv"}, status: &driver.TaskStatus{State: driver.TaskStateExited, Executable: outside}},
		"no status":   {task: &structs.Task{Name: "srv"}},
		"no artifact": {task: &structs.Task{Name: "srv", Driver: "raw"}, status: &driver.TaskStatus{State: driver.TaskStateRunning}},
		"missing":     nativeMember("srv", filepath.Join(allocDir, "nope"), nil, nil),
		"relative":    nativeMember("srv", "bin/server", nil, nil),
		"fifo":        nativeMember("srv", fifo, nil, nil),
		"symlink out": nativeMember("srv", link, nil, nil),
	}
	for name, mt := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := endpointIdentity(alloc, allocDir, []memberTask{mt}, &fileDigestCache{})
			if !errors.Is(err, errNoIdentity) {
				t.Fatalf("err = %v, want errNoIdentity", err)
			}
		})
	}
	// A regular binary beneath the allocation directory is read there.
	in := writeExec(t, filepath.Join(allocDir, "srv", "local"), "real", "#!/bin/sh\n")
	if _, err := endpointIdentity(alloc, allocDir, []memberTask{nativeMember("srv", in, nil, nil)}, nil); err != nil {
		t.Fatal(err)
	}
}
