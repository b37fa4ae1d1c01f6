package command

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// resolveNodeArg returns the node ID for an argument, or with self the
// node of the agent at -address.
func (m *Meta) resolveNodeArg(client *api.Client, self bool, args []string) (string, int) {
	if self {
		if len(args) != 0 {
			return "", m.errorf("-self takes no node ID argument")
		}
		info, err := client.Agent().Self()
		if err != nil {
			return "", m.errorf("Error reading the agent's own node: %v", err)
		}
		id, _ := info["NodeID"].(string)
		if st, ok := info["stats"].(map[string]interface{}); ok && id == "" {
			if c, ok := st["client"].(map[string]interface{}); ok {
				id, _ = c["node_id"].(string)
			}
		}
		if id == "" {
			return "", m.errorf("The agent at %s runs no client: -self needs a client agent", m.address)
		}
		return id, 0
	}
	if len(args) != 1 {
		m.UI.Error("This command takes one argument: the node ID (or -self)")
		return "", cli.RunResultHelp
	}
	if strings.TrimSpace(args[0]) == "" {
		return "", m.errorf("Node ID must not be empty")
	}
	return args[0], 0
}

// NodeDrainCommand starts or stops a node's drain.
type NodeDrainCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodeDrainCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node drain [options] -enable|-disable NODE
       gpulayer node drain [options] -enable|-disable -self

  Drains a node: it takes no new allocations, its service allocations are
  placed on other nodes and each old one stops once its replacement runs,
  and batch allocations (and services no other node can take) run until
  the deadline, when whatever is left is stopped at once, shutdown_delay
  or not. The command returns once the drain is set; node status shows
  Drain true until it ends. An opportunistic node about to sleep drains
  itself with -self.
` + generalOptions + `
Drain Options:

  -enable
    Start the drain.

  -disable
    Stop the drain; the node becomes eligible again unless
    -keep-ineligible.

  -deadline=<duration>
    How long the drain may take, e.g. 10m. Default: 1h. 0 means no
    deadline; -force stops everything at once.

  -force
    Stop every allocation on the node now.

  -keep-ineligible
    With -disable, leave the node ineligible.

  -self
    Drain the node of the agent at -address.
`)
}

// Synopsis returns a one-line description.
func (c *NodeDrainCommand) Synopsis() string { return "Drain a node of its allocations" }

// Run starts or stops the drain.
func (c *NodeDrainCommand) Run(args []string) int {
	fs := c.Meta.flagSet("node drain", false)
	var enable, disable, force, keep, self bool
	var deadline time.Duration
	fs.BoolVar(&enable, "enable", false, "")
	fs.BoolVar(&disable, "disable", false, "")
	fs.BoolVar(&force, "force", false, "")
	fs.BoolVar(&keep, "keep-ineligible", false, "")
	fs.BoolVar(&self, "self", false, "")
	fs.DurationVar(&deadline, "deadline", time.Hour, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if enable == disable {
		return c.Meta.errorf("Exactly one of -enable and -disable is required")
	}
	if deadline < 0 {
		return c.Meta.errorf("Invalid -deadline=%s: must not be negative (use -force to stop everything now)", deadline)
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	nodeID, code := c.Meta.resolveNodeArg(client, self, fs.Args())
	if nodeID == "" {
		return code
	}
	req := &api.NodeDrainRequest{Enable: enable, Deadline: deadline, KeepIneligible: keep}
	if force {
		req.Deadline = -1
	}
	if _, err := client.NodeDrain(context.Background(), nodeID, req); err != nil {
		return c.Meta.errorf("Error updating drain of node %q: %v", nodeID, err)
	}
	if enable {
		c.Meta.UI.Output(fmt.Sprintf("Node %q drain strategy set", shortID(nodeID)))
	} else {
		c.Meta.UI.Output(fmt.Sprintf("Node %q drain stopped", shortID(nodeID)))
	}
	return 0
}

// NodeEligibilityCommand marks a node eligible or ineligible.
type NodeEligibilityCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodeEligibilityCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node eligibility [options] -enable|-disable NODE|-self

  Marks a node eligible (-enable) or ineligible (-disable) for new
  allocations. Running allocations are not touched.
` + generalOptions + `
Eligibility Options:

  -enable
    The node takes new allocations.

  -disable
    The node takes no new allocations.

  -self
    The node of the agent at -address.
`)
}

// Synopsis returns a one-line description.
func (c *NodeEligibilityCommand) Synopsis() string {
	return "Mark a node eligible or ineligible for allocations"
}

// Run updates the eligibility.
func (c *NodeEligibilityCommand) Run(args []string) int {
	fs := c.Meta.flagSet("node eligibility", false)
	var enable, disable, self bool
	fs.BoolVar(&enable, "enable", false, "")
	fs.BoolVar(&disable, "disable", false, "")
	fs.BoolVar(&self, "self", false, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if enable == disable {
		return c.Meta.errorf("Exactly one of -enable and -disable is required")
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	nodeID, code := c.Meta.resolveNodeArg(client, self, fs.Args())
	if nodeID == "" {
		return code
	}
	if _, err := client.NodeEligibility(context.Background(), nodeID, enable); err != nil {
		return c.Meta.errorf("Error updating eligibility of node %q: %v", nodeID, err)
	}
	state := "ineligible"
	if enable {
		state = "eligible"
	}
	c.Meta.UI.Output(fmt.Sprintf("Node %q is %s", shortID(nodeID), state))
	return 0
}
