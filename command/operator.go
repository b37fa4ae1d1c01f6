package command

import (
	"crypto/rand"
	"encoding/base64"
	"strings"

	"github.com/hashicorp/cli"
)

// OperatorCommand groups the operator subcommands; run alone it prints
// help.
type OperatorCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *OperatorCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer operator <subcommand> [options] [args]

  Tools for the operators of an HA cluster: the Raft peer set
  ("operator raft"), snapshots of the cluster state ("operator snapshot")
  and gossip encryption keys ("operator gossip keygen").
`)
}

// Synopsis returns a one-line description.
func (c *OperatorCommand) Synopsis() string { return "Operate an HA cluster" }

// Run prints help; see groupRun.
func (c *OperatorCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// OperatorRaftCommand groups the operator raft subcommands.
type OperatorRaftCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *OperatorRaftCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer operator raft <subcommand> [options]

  Inspect and change the Raft peer set: "list-peers", "remove-peer".
`)
}

// Synopsis returns a one-line description.
func (c *OperatorRaftCommand) Synopsis() string { return "Inspect and change the Raft peer set" }

// Run prints help; see groupRun.
func (c *OperatorRaftCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// OperatorSnapshotCommand groups the operator snapshot subcommands.
type OperatorSnapshotCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *OperatorSnapshotCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer operator snapshot <subcommand> [options] FILE

  Save the cluster's state to a checksummed archive ("save FILE") or
  replace the state with one ("restore FILE").
`)
}

// Synopsis returns a one-line description.
func (c *OperatorSnapshotCommand) Synopsis() string { return "Save and restore the cluster state" }

// Run prints help; see groupRun.
func (c *OperatorSnapshotCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// OperatorGossipCommand groups the operator gossip subcommands.
type OperatorGossipCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *OperatorGossipCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer operator gossip <subcommand>

  Manage gossip encryption: "keygen" (or Nomad's "keyring generate")
  prints a new key.
`)
}

// Synopsis returns a one-line description.
func (c *OperatorGossipCommand) Synopsis() string { return "Manage gossip encryption" }

// Run prints help; see groupRun.
func (c *OperatorGossipCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// OperatorGossipKeyringCommand groups "operator gossip keyring", Nomad's
// name for the key commands: "keyring generate" is "keygen".
type OperatorGossipKeyringCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *OperatorGossipKeyringCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer operator gossip keyring generate

  Prints a new gossip encryption key (the same as "operator gossip keygen").
`)
}

// Synopsis returns a one-line description.
func (c *OperatorGossipKeyringCommand) Synopsis() string { return "Manage gossip encryption keys" }

// Run prints help; see groupRun.
func (c *OperatorGossipKeyringCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// GossipKeySize is the size of a key from `operator gossip keygen`: 32
// bytes, for AES-256-GCM (memberlist accepts 16, 24 or 32).
const GossipKeySize = 32

// OperatorGossipKeygenCommand prints a new gossip encryption key.
type OperatorGossipKeygenCommand struct {
	Meta *Meta
	// Rand is the randomness source; nil means crypto/rand.
	Rand func(b []byte) (int, error)
}

// Help returns the command's usage.
func (c *OperatorGossipKeygenCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer operator gossip keygen

  Prints a new gossip encryption key: 32 random bytes from the operating
  system's secure source, base64-encoded. Give the same key to every
  server with -encrypt=KEY (or encrypt = "KEY" in the server block). It
  talks to no agent.
`)
}

// Synopsis returns a one-line description.
func (c *OperatorGossipKeygenCommand) Synopsis() string { return "Generate a gossip encryption key" }

// Run prints the key.
func (c *OperatorGossipKeygenCommand) Run(args []string) int {
	if len(args) != 0 {
		c.Meta.UI.Error("This command takes no arguments")
		return cli.RunResultHelp
	}
	read := c.Rand
	if read == nil {
		read = rand.Read
	}
	key := make([]byte, GossipKeySize)
	if n, err := read(key); err != nil || n != len(key) {
		return c.Meta.errorf("Error reading %d random bytes: %v (got %d)", len(key), err, n)
	}
	c.Meta.UI.Output(base64.StdEncoding.EncodeToString(key))
	return 0
}
