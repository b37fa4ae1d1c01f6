package command

import (
	"fmt"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// NodeSecretRotateCommand gives a node a new secret.
type NodeSecretRotateCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodeSecretRotateCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node secret rotate [options] NODE
       gpulayer node secret rotate [options] -self

  Gives a node a new node secret. The node's own client agent asks the
  servers for it with its current secret, stores it and keeps working;
  from then on the old secret is refused. The CLI looks the node's HTTP
  address up through -address and asks that agent (with -self, the agent
  at -address). Needs node write rights. The secret is never printed.
` + generalOptions + `
Rotate Options:

  -self
    Rotate the secret of the node of the agent at -address.
`)
}

// Synopsis returns a one-line description.
func (c *NodeSecretRotateCommand) Synopsis() string { return "Rotate a node's secret" }

// Run asks the node's agent to rotate.
func (c *NodeSecretRotateCommand) Run(args []string) int {
	fs := c.Meta.flagSet("node secret rotate", false)
	var self bool
	fs.BoolVar(&self, "self", false, "")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	id, code := c.Meta.resolveNodeArg(client, self, fs.Args())
	if id == "" {
		return code
	}
	target := client
	if !self {
		node, _, err := client.Nodes().Info(id, nil)
		if err != nil {
			return c.Meta.errorf("Error reading node %s: %v", id, err)
		}
		if node.HTTPAddr == "" {
			return c.Meta.errorf("Node %s has no HTTP address to reach its agent", id)
		}
		if target, err = api.NewClient(&api.Config{Address: node.HTTPAddr, Token: c.Meta.token}); err != nil {
			return c.Meta.errorf("Error initializing client for node %s at %s: %v", id, node.HTTPAddr, err)
		}
	}
	got, err := target.Nodes().RotateNodeSecret(nil)
	if err != nil {
		return c.Meta.errorf("Error rotating the secret of node %s: %v", id, err)
	}
	if got != "" && got != id && !strings.HasPrefix(got, id) {
		return c.Meta.errorf("Error: the agent reached rotated node %s, not %s", got, id)
	}
	c.Meta.UI.Output(fmt.Sprintf("Node %s has a new secret; the old one is refused", got))
	return 0
}
