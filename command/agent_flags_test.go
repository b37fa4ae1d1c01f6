package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"
)

// TestAgentClusterFlags: the cluster flags reach the agent config, lists
// may repeat or be comma-separated, and flags override the config file.
func TestAgentClusterFlags(t *testing.T) {
	c := &AgentCommand{Ui: cli.NewMockUi()}
	file := filepath.Join(t.TempDir(), "agent.hcl")
	if err := os.WriteFile(file, []byte("server {\n  retry_join = [\"10.9.9.9\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.readConfig([]string{"-server", "-bootstrap-expect=3", "-bind=10.0.0.1", "-http-bind=0.0.0.0",
		"-serf-port=5000", "-retry-join=10.0.0.2", "-retry-join=10.0.0.3:5000,10.0.0.4", "-config=" + file,
		"-encrypt=" + strings.Repeat("A", 43) + "=", "-data-dir=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Server.RetryJoin, " "); got != "10.0.0.2 10.0.0.3:5000 10.0.0.4" {
		t.Errorf("retry_join %q (flags replace the file's list)", got)
	}
	if got := strings.Join(cfg.RetryJoinAddrs(), " "); got != "10.0.0.2:5000 10.0.0.3:5000 10.0.0.4:5000" {
		t.Errorf("join addresses %q, want the -serf-port default added", got)
	}
	if cfg.HTTPAddr() != "0.0.0.0:4656" || cfg.SerfAddr() != "10.0.0.1:5000" || len(cfg.GossipKey()) != 32 || cfg.Server.BootstrapExpect != 3 {
		t.Errorf("http %s serf %s key %d expect %d", cfg.HTTPAddr(), cfg.SerfAddr(), len(cfg.GossipKey()), cfg.Server.BootstrapExpect)
	}

	cfg, err = c.readConfig([]string{"-client", "-servers=10.0.0.1:4656, 10.0.0.2:4656", "-servers=http://10.0.0.3:4656", "-data-dir=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Client.Servers, " "); got != "10.0.0.1:4656 10.0.0.2:4656 http://10.0.0.3:4656" {
		t.Errorf("servers %q", got)
	}
}

func TestAgentClusterFlagsBadInput(t *testing.T) {
	c := &AgentCommand{Ui: cli.NewMockUi()}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-client"}, "client.servers: a client without a local server"},
		{[]string{"-client", "-servers=10.0.0.1"}, "client.servers[0]"},
		{[]string{"-server", "-encrypt=short"}, "server.encrypt"},
		{[]string{"-server", "-retry-join=http://x"}, "server.retry_join[0]"},
		{[]string{"-server", "-bootstrap-expect=3"}, "gpulayer operator gossip keyring generate"},
		{[]string{"-server", "-http-bind=everywhere"}, "addresses.http"},
		{[]string{"-server", "-serf-port=x"}, "invalid value"},
	} {
		_, err := c.readConfig(append(tc.args, "-data-dir="+t.TempDir()))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error mentioning %q", tc.args, err, tc.want)
		}
	}
}

// TestAgentNodePoolFlag: -node-pool reaches the client config and
// overrides the file's client { node_pool }; "all" is refused.
func TestAgentNodePoolFlag(t *testing.T) {
	c := &AgentCommand{Ui: cli.NewMockUi()}
	file := filepath.Join(t.TempDir(), "agent.hcl")
	if err := os.WriteFile(file, []byte("client {\n  node_pool = \"from-file\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.readConfig([]string{"-dev", "-config=" + file, "-data-dir=" + t.TempDir()})
	if err != nil || cfg.Client.NodePool != "from-file" {
		t.Fatalf("file node_pool = %q, %v", cfg.Client.NodePool, err)
	}
	cfg, err = c.readConfig([]string{"-dev", "-config=" + file, "-node-pool=gpu", "-data-dir=" + t.TempDir()})
	if err != nil || cfg.Client.NodePool != "gpu" {
		t.Fatalf("flag node_pool = %q, %v", cfg.Client.NodePool, err)
	}
	if _, err := c.readConfig([]string{"-dev", "-node-pool=all", "-data-dir=" + t.TempDir()}); err == nil || !strings.Contains(err.Error(), "client.node_pool") {
		t.Fatalf("-node-pool=all: %v", err)
	}
}
