package server_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/server"
	provexec "github.com/gpulayer/gpulayer/server/provision/exec"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/structs"
)

// execPool is a pool of the exec provider running command.
func execPool(name, command string) *structs.NodePool {
	return &structs.NodePool{Name: name, Scaling: &structs.PoolScalingPolicy{Provider: "exec", Max: 2,
		ProviderConfig: map[string]string{"command": command}}}
}

// TestPoolProviderProgramsComeFromServerConfig proves that an API caller
// with pool write cannot make the servers run a program, an image or a
// binary of its choosing: the exec provider's "command" and the docker
// provider's "image" and "binary" must be ones the server's own agent
// config lists (server.provision_exec_commands, provision_docker_images,
// provision_docker_binaries); with none listed, none may be named.
func TestPoolProviderProgramsComeFromServerConfig(t *testing.T) {
	dir := t.TempDir()
	allowed := filepath.Join(dir, "cloud-provider")
	if err := os.WriteFile(allowed, []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)

	// No allow-list: an executable that exists on the server (the shell)
	// is still refused, and so are an image and a binary.
	bare := servertest.NewServer(t)
	for name, p := range map[string]*structs.NodePool{
		"exec /bin/sh":          execPool("rce", "/bin/sh"),
		"exec listed elsewhere": execPool("rce", allowed),
		"docker image": {Name: "img", Scaling: &structs.PoolScalingPolicy{Provider: "docker", Max: 1,
			ProviderConfig: map[string]string{"image": "alpine:3"}}},
		"docker binary": {Name: "bin", Scaling: &structs.PoolScalingPolicy{Provider: "docker", Max: 1,
			ProviderConfig: map[string]string{"binary": "/bin/sh"}}},
	} {
		_, err := bare.UpsertNodePools(ctx, []*structs.NodePool{p})
		if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "server.provision_") {
			t.Fatalf("%s: upsert = %v, want ErrInvalid naming the server's allow-list", name, err)
		}
	}
	// A docker pool that names neither image nor binary needs no list.
	if _, err := bare.UpsertNodePools(ctx, []*structs.NodePool{{Name: "plain", Scaling: &structs.PoolScalingPolicy{
		Provider: "docker", Max: 1, ProviderConfig: map[string]string{"memory_mb": "256"}}}}); err != nil {
		t.Fatalf("plain docker pool: %v", err)
	}

	// With an allow-list, only what it names is accepted.
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
		c.Provision.ExecCommands = []string{allowed}
		c.Provision.DockerImages = []string{"gpulayer-host:mine"}
		c.Provision.DockerBinaries = []string{"/opt/gpulayer/gpulayer"}
	}))
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{execPool("ok", allowed)}); err != nil {
		t.Fatalf("listed command: %v", err)
	}
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{execPool("rce", "/bin/sh")}); !errors.Is(err, structs.ErrInvalid) ||
		!strings.Contains(err.Error(), `"/bin/sh" is not allowed: the server's agent config (server.provision_exec_commands) lists 1 entry, and this is not it`) {
		t.Fatalf("unlisted command: %v", err)
	}
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{{Name: "img", Scaling: &structs.PoolScalingPolicy{Provider: "docker", Max: 1,
		ProviderConfig: map[string]string{"image": "gpulayer-host:mine", "binary": "/opt/gpulayer/gpulayer"}}}}); err != nil {
		t.Fatalf("listed image and binary: %v", err)
	}
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{{Name: "img2", Scaling: &structs.PoolScalingPolicy{Provider: "docker", Max: 1,
		ProviderConfig: map[string]string{"image": "attacker/root:latest"}}}}); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("unlisted image: %v", err)
	}
	// pass_env may name only the variables the server config lists.
	passEnv := func(names string) *structs.NodePool {
		p := execPool("env", allowed)
		p.Scaling.ProviderConfig["pass_env"] = names
		return p
	}
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{passEnv("HOME")}); !errors.Is(err, structs.ErrInvalid) ||
		!strings.Contains(err.Error(), "server.provision_exec_pass_env") {
		t.Fatalf("pass_env with no list: %v", err)
	}
	le := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
		c.Provision.ExecCommands = []string{allowed}
		c.Provision.ExecPassEnv = []string{"AWS_PROFILE", "HOME"}
	}))
	if _, err := le.UpsertNodePools(ctx, []*structs.NodePool{passEnv("HOME, AWS_PROFILE")}); err != nil {
		t.Fatalf("listed pass_env: %v", err)
	}
	if _, err := le.UpsertNodePools(ctx, []*structs.NodePool{passEnv("HOME,AWS_SECRET_ACCESS_KEY")}); !errors.Is(err, structs.ErrInvalid) ||
		!strings.Contains(err.Error(), `"AWS_SECRET_ACCESS_KEY" is not allowed: the server's agent config (server.provision_exec_pass_env) lists 2 entries, and this is none of them`) {
		t.Fatalf("unlisted pass_env: %v", err)
	}
	// A pool without a scaling policy has no provider config to check.
	if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{{Name: "static"}}); err != nil {
		t.Fatalf("static pool: %v", err)
	}
}

// TestPoolPassEnvAllowListBypass (hostile17): with only HOME listed in
// server.provision_exec_pass_env, no spelling of pass_env gets another
// server variable to the provider program: another case, inner
// whitespace or other separators are refused, and what is accepted
// (padding, empty entries, duplicates) makes the provider pass HOME alone.
func TestPoolPassEnvAllowListBypass(t *testing.T) {
	dir := t.TempDir()
	allowed := filepath.Join(dir, "cloud-provider")
	if err := os.WriteFile(allowed, []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := servertest.NewServer(t, servertest.WithConfig(func(c *server.Config) {
		c.Provision.ExecCommands = []string{allowed}
		c.Provision.ExecPassEnv = []string{"HOME"}
	}))
	ctx := ctxT(t)
	for i, v := range []string{"home", "Home", "HOME,home", "HOME AWS_SECRET", "HOME;AWS_SECRET", "HOME:AWS_SECRET",
		"HOME,\tAWS_SECRET", "HOME\nAWS_SECRET", "HOME,AWS_SECRET,HOME", "HOME=x", "HOME\x00", "GPULAYER_JOIN_TOKEN"} {
		p := execPool(fmt.Sprintf("refused-%d", i), allowed)
		p.Scaling.ProviderConfig["pass_env"] = v
		if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{p}); !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("pass_env %q accepted (%v)", v, err)
		}
	}
	for i, v := range []string{" HOME ", ",,HOME,", "HOME,HOME", "\tHOME\n,", ""} {
		p := execPool(fmt.Sprintf("accepted-%d", i), allowed)
		p.Scaling.ProviderConfig["pass_env"] = v
		if _, err := s.UpsertNodePools(ctx, []*structs.NodePool{p}); err != nil {
			t.Errorf("pass_env %q: %v", v, err)
			continue
		}
		cfg, err := provexec.ParseConfig(p.Scaling.ProviderConfig)
		if err != nil {
			t.Errorf("pass_env %q: the provider refuses what the server accepted: %v", v, err)
			continue
		}
		for _, n := range cfg.PassEnv {
			if n != "HOME" {
				t.Errorf("pass_env %q: the provider passes %q", v, n)
			}
		}
	}
}
