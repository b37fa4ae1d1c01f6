package command

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/internal/porttest"
)

func freeTCPPort(t *testing.T) int {
	t.Helper()
	return porttest.Take(t)
}

// startServerAgent runs a single in-process server agent with gossip on
// loopback and returns its HTTP URL.
func startServerAgent(t *testing.T, name string) string {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.Name = name
	cfg.BindAddr = "127.0.0.1"
	cfg.DataDir = t.TempDir()
	cfg.Server.Enabled = true
	cfg.Ports.HTTP, cfg.Ports.Raft, cfg.Ports.Serf = freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	addr := "http://" + a.HTTPAddr()
	// ACLs are on (the default outside -dev): bootstrap through the CLI
	// and let every later command take the token from GPULAYER_TOKEN.
	t.Setenv("GPULAYER_TOKEN", "")
	t.Setenv("NOMAD_TOKEN", "")
	r := runCmd(t, addr, "acl", "bootstrap", "-json")
	var tok struct{ SecretID string }
	if r.code != 0 || json.Unmarshal([]byte(r.out), &tok) != nil || tok.SecretID == "" {
		t.Fatalf("acl bootstrap: %d %s%s", r.code, r.out, r.err)
	}
	t.Setenv("GPULAYER_TOKEN", tok.SecretID)
	return addr
}

// TestClusterCommands runs the HA commands against a real one-server
// agent: members, list-peers, snapshot save and restore (and a corrupted
// archive refused), and their usage errors.
func TestClusterCommands(t *testing.T) {
	addr := startServerAgent(t, "srv-a")

	r := runCmd(t, addr, "server", "members")
	if r.code != 0 || !strings.Contains(r.out, "srv-a") || !strings.Contains(r.out, "alive") || !strings.Contains(r.out, "true") {
		t.Fatalf("server members: %d\n%s%s", r.code, r.out, r.err)
	}
	if lines := strings.Split(strings.TrimSpace(r.out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "Name") {
		t.Errorf("server members table:\n%s", r.out)
	}
	r = runCmd(t, addr, "server", "members", "-json")
	if r.code != 0 || !strings.Contains(r.out, `"Name": "srv-a"`) {
		t.Errorf("server members -json: %d %s", r.code, r.out)
	}

	r = runCmd(t, addr, "operator", "raft", "list-peers")
	if r.code != 0 || !strings.Contains(r.out, "srv-a") || !strings.Contains(r.out, "leader") {
		t.Fatalf("list-peers: %d\n%s%s", r.code, r.out, r.err)
	}

	dir := t.TempDir()
	snap := filepath.Join(dir, "state.snap")
	r = runCmd(t, addr, "operator", "snapshot", "save", snap)
	if r.code != 0 || !strings.Contains(r.out, "Saved snapshot") {
		t.Fatalf("snapshot save: %d %s%s", r.code, r.out, r.err)
	}
	data, err := os.ReadFile(snap)
	if err != nil || len(data) == 0 {
		t.Fatalf("snapshot file: %d bytes, %v", len(data), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".state.snap.tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	r = runCmd(t, addr, "operator", "snapshot", "restore", snap)
	if r.code != 0 || !strings.Contains(r.out, "Restored snapshot") {
		t.Fatalf("snapshot restore: %d %s%s", r.code, r.out, r.err)
	}
	bad := filepath.Join(dir, "bad.snap")
	corrupt := append([]byte(nil), data...)
	corrupt[len(corrupt)/2] ^= 0xff
	if err := os.WriteFile(bad, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCmd(t, addr, "operator", "snapshot", "restore", bad)
	if r.code != 1 || !strings.Contains(r.err, "Error restoring snapshot") {
		t.Errorf("restore of a corrupted archive: %d %s%s", r.code, r.out, r.err)
	}
	if r = runCmd(t, addr, "server", "members"); r.code != 0 {
		t.Errorf("agent unusable after a refused restore: %s", r.err)
	}
}

func TestClusterCommandsBadInput(t *testing.T) {
	// An address nothing listens on: commands that reach the agent fail
	// with a message; usage errors fail before any request.
	dead := fmt.Sprintf("http://127.0.0.1:%d", freeTCPPort(t))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "members", "extra"}, "takes no arguments"},
		{[]string{"server", "members"}, "Error querying servers"},
		{[]string{"server", "join"}, "at least one argument"},
		{[]string{"server", "join", "127.0.0.1:1"}, "Error joining"},
		{[]string{"operator", "raft", "list-peers"}, "Error getting the Raft configuration"},
		{[]string{"operator", "raft", "remove-peer"}, "exactly one of -peer-id and -peer-address"},
		{[]string{"operator", "raft", "remove-peer", "-peer-id=a", "-peer-address=b:1"}, "exactly one"},
		{[]string{"operator", "raft", "remove-peer", "x"}, "takes no arguments"},
		{[]string{"operator", "snapshot", "save"}, "one argument"},
		{[]string{"operator", "snapshot", "save", filepath.Join(t.TempDir(), "s")}, "Error saving snapshot"},
		{[]string{"operator", "snapshot", "restore", filepath.Join(t.TempDir(), "missing")}, "Error opening snapshot"},
		{[]string{"operator", "gossip", "keygen", "extra"}, "takes no arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCmd(t, dead, tc.args...)
			if r.code == 0 || !strings.Contains(r.err, tc.want) {
				t.Errorf("exit %d, stderr %q; want non-zero mentioning %q", r.code, r.err, tc.want)
			}
		})
	}
	t.Run("remove-peer on a live agent names the missing peer", func(t *testing.T) {
		addr := startServerAgent(t, "srv-b")
		r := runCmd(t, addr, "operator", "raft", "remove-peer", "-peer-id=nope")
		if r.code != 1 || !strings.Contains(r.err, "nope") {
			t.Errorf("exit %d %q", r.code, r.err)
		}
	})
}

func TestGossipKeygen(t *testing.T) {
	r := runCmd(t, "http://127.0.0.1:1", "operator", "gossip", "keygen")
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(r.out))
	if r.code != 0 || err != nil || len(key) != GossipKeySize {
		t.Fatalf("keygen: %d %q (%d bytes, %v)", r.code, r.out, len(key), err)
	}
	again := runCmd(t, "http://127.0.0.1:1", "operator", "gossip", "keygen")
	if again.out == r.out {
		t.Errorf("two keys are equal: %s", r.out)
	}
	// The agent accepts what keygen prints.
	cfg := agent.DefaultConfig()
	cfg.Server.Enabled = true
	cfg.Server.Encrypt = strings.TrimSpace(r.out)
	if err := cfg.Validate(); err != nil {
		t.Errorf("agent refuses the key: %v", err)
	}
	// A failing random source is an error, not a weak key.
	ui := cli.NewMockUi()
	c := &OperatorGossipKeygenCommand{Meta: &Meta{UI: ui}, Rand: func(b []byte) (int, error) { return 0, errors.New("no entropy") }}
	if code := c.Run(nil); code != 1 || !strings.Contains(ui.ErrorWriter.String(), "no entropy") {
		t.Errorf("failing source: %d %q", code, ui.ErrorWriter.String())
	}
}
