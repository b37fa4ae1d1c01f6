package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/structs"
)

// TestProviderCacheRefusesUnlistedProgram proves the leader never builds a
// provider for a pool already in the state (written before the allow-list
// changed, or through another server) whose command its own config does
// not list, and builds it once the list names the program.
func TestProviderCacheRefusesUnlistedProgram(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "prov")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := &Server{config: &Config{}, logger: hclog.NewNullLogger()}
	c := &providerCache{server: srv, byPool: map[string]*cachedProvider{}}
	pool := &structs.NodePool{Name: "p", Scaling: &structs.PoolScalingPolicy{Provider: "exec", Max: 1,
		ProviderConfig: map[string]string{"command": prog}}}
	if _, err := c.get(pool); !errors.Is(err, provision.ErrNoProvider) || !strings.Contains(err.Error(), "provision_exec_commands") {
		t.Fatalf("unlisted: %v", err)
	}
	srv.config.Provision.ExecCommands = []string{prog}
	if p, err := c.get(pool); err != nil || p == nil {
		t.Fatalf("listed: %v, %v", p, err)
	}
}
