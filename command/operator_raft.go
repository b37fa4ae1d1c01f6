package command

import (
	"strings"

	"github.com/hashicorp/cli"
)

// OperatorRaftListPeersCommand lists the Raft peer set.
type OperatorRaftListPeersCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *OperatorRaftListPeersCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer operator raft list-peers [options]

  Lists the servers of the Raft configuration: name, ID, Raft address,
  state (leader or follower) and whether it votes. A healthy three-server
  cluster lists three voters, one of them the leader.
` + generalOptions + `
List Peers Options:
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *OperatorRaftListPeersCommand) Synopsis() string { return "List the Raft peers" }

// Run lists the peers.
func (c *OperatorRaftListPeersCommand) Run(args []string) int {
	fs := c.Meta.flagSet("operator raft list-peers", true)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	conf, err := client.Operator().RaftGetConfiguration(nil)
	if err != nil {
		return c.Meta.errorf("Error getting the Raft configuration: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(conf)
	}
	rows := make([][]string, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		state := "follower"
		if s.Leader {
			state = "leader"
		}
		voter := "true"
		if !s.Voter {
			voter = "false"
		}
		rows = append(rows, []string{s.Node, s.ID, s.Address, state, voter})
	}
	c.Meta.UI.Output(table([]string{"Node", "ID", "Address", "State", "Voter"}, rows))
	return 0
}

// OperatorRaftRemovePeerCommand removes a server from the Raft peer set.
type OperatorRaftRemovePeerCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *OperatorRaftRemovePeerCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer operator raft remove-peer [options] -peer-id=ID | -peer-address=HOST:PORT

  Removes a server that is gone for good from the Raft configuration, so
  the remaining servers need fewer votes for a quorum. The leader cannot
  remove itself.
` + generalOptions + `
Remove Peer Options:

  -peer-id=<id>
    The Raft ID (server name) of the server to remove.

  -peer-address=<host:port>
    The Raft address of the server to remove.
`)
}

// Synopsis returns a one-line description.
func (c *OperatorRaftRemovePeerCommand) Synopsis() string {
	return "Remove a server from the Raft peer set"
}

// Run removes the peer.
func (c *OperatorRaftRemovePeerCommand) Run(args []string) int {
	fs := c.Meta.flagSet("operator raft remove-peer", false)
	var id, addr string
	fs.StringVar(&id, "peer-id", "", "")
	fs.StringVar(&addr, "peer-address", "", "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	switch {
	case fs.NArg() != 0:
		c.Meta.UI.Error("This command takes no arguments; use -peer-id or -peer-address")
		return cli.RunResultHelp
	case (id == "") == (addr == ""):
		c.Meta.UI.Error("Give exactly one of -peer-id and -peer-address")
		return cli.RunResultHelp
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	if id != "" {
		err = client.Operator().RaftRemovePeerByID(id, nil)
	} else {
		err = client.Operator().RaftRemovePeerByAddress(addr, nil)
	}
	if err != nil {
		return c.Meta.errorf("Error removing peer: %v", err)
	}
	c.Meta.UI.Output("Removed peer " + id + addr)
	return 0
}
