package command

import (
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/cli"
)

// ServerCommand groups the server subcommands; run alone it prints help.
type ServerCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ServerCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer server <subcommand> [options] [args]

  Inspect and join the servers of an HA cluster: "server members" lists
  the servers known through gossip, "server join" joins more.
`)
}

// Synopsis returns a one-line description.
func (c *ServerCommand) Synopsis() string { return "Interact with the servers of a cluster" }

// Run prints help; see groupRun.
func (c *ServerCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// ServerMembersCommand lists the servers the agent knows through gossip.
type ServerMembersCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ServerMembersCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer server members [options]

  Lists the servers the agent's server knows through gossip: name, gossip
  address, status (alive, failed, left), whether it leads, its datacenter,
  Raft and HTTP addresses and its bootstrap_expect. A healthy three-server
  cluster shows three alive servers and one leader.
` + generalOptions + `
Server Members Options:
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ServerMembersCommand) Synopsis() string { return "List the servers known through gossip" }

// Run lists the members.
func (c *ServerMembersCommand) Run(args []string) int {
	fs := c.Meta.flagSet("server members", true)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	members, err := client.Agent().Members()
	if err != nil {
		return c.Meta.errorf("Error querying servers: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(members)
	}
	sort.Slice(members.Members, func(i, j int) bool { return members.Members[i].Name < members.Members[j].Name })
	rows := make([][]string, 0, len(members.Members))
	for _, m := range members.Members {
		rows = append(rows, []string{m.Name, m.GossipAddr(), m.Status, strconv.FormatBool(m.Leader), m.Datacenter,
			m.RaftAddr, m.HTTPAddr, strconv.Itoa(m.BootstrapExpect)})
	}
	c.Meta.UI.Output(table([]string{"Name", "Address", "Status", "Leader", "Datacenter", "Raft", "HTTP", "Expect"}, rows))
	return 0
}

// ServerJoinCommand asks the agent's server to join other servers.
type ServerJoinCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ServerJoinCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer server join [options] <address> [<address>...]

  Joins the agent's server to the servers at the given gossip addresses
  ("host" or "host:port"; the gossip port defaults to 4658). Servers that
  start with -retry-join do this themselves.
` + generalOptions)
}

// Synopsis returns a one-line description.
func (c *ServerJoinCommand) Synopsis() string { return "Join servers together over gossip" }

// Run joins.
func (c *ServerJoinCommand) Run(args []string) int {
	fs := c.Meta.flagSet("server join", false)
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() == 0 {
		c.Meta.UI.Error("This command takes at least one argument: the gossip address of a server")
		return cli.RunResultHelp
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	n, err := client.Agent().Join(fs.Args()...)
	if err != nil {
		return c.Meta.errorf("Error joining: %v", err)
	}
	c.Meta.UI.Output("Joined " + strconv.Itoa(n) + " servers successfully")
	return 0
}
