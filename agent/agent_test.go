package agent_test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent"
)

// An HTTP port already in use fails start-up before Raft writes anything
// into the data dir.
func TestAgentPortInUseFailsBeforeRaft(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := agent.DevConfig()
	cfg.DataDir = taskUserDir(t)
	cfg.Ports.HTTP = ln.Addr().(*net.TCPAddr).Port
	cfg.Ports.Raft = freePort(t)
	_, err = agent.New(cfg, hclog.New(&hclog.LoggerOptions{Output: io.Discard}))
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("agent.New = %v, want a listen error", err)
	}
	if _, statErr := os.Stat(filepath.Join(cfg.DataDir, "server", "raft", "raft.db")); !os.IsNotExist(statErr) {
		t.Fatalf("raft.db exists after a failed start (stat: %v)", statErr)
	}
}
