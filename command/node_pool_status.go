package command

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// NodePoolStatusCommand shows the provisioning status of node pools.
type NodePoolStatusCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodePoolStatusCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node pool status [options] [NAME]

  Shows a node pool's provisioning: its nodes (idle, busy, draining, down,
  or joining: the host exists, its node has not registered), the pending
  provision requests, the last scaling decisions and why, the failed
  provider calls with their errors, and the blocked work the pool makes no
  hosts for (Waiting) and why. Without NAME, one line per pool that has a
  scaling policy, with how many such reasons it has. Needs node read rights.
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *NodePoolStatusCommand) Synopsis() string {
	return "Show a node pool's nodes, requests and scaling decisions"
}

// Run prints the status.
func (c *NodePoolStatusCommand) Run(args []string) int {
	fs := c.Meta.flagSet("node pool status", true)
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() > 1 {
		c.Meta.UI.Error("This command takes at most one argument: the pool's name")
		return cli.RunResultHelp
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	if fs.NArg() == 1 {
		st, _, err := client.NodePools().Status(fs.Arg(0), nil)
		if err != nil {
			return c.Meta.errorf("Error reading node pool %s: %v", fs.Arg(0), err)
		}
		if c.Meta.jsonOutput {
			return c.Meta.printJSON(st)
		}
		c.Meta.UI.Output(c.renderPool(st))
		return 0
	}
	pools, _, err := client.NodePools().List(nil)
	if err != nil {
		return c.Meta.errorf("Error listing node pools: %v", err)
	}
	var all []*api.NodePoolStatus
	for _, p := range pools {
		if p.Scaling == nil {
			continue
		}
		st, _, err := client.NodePools().Status(p.Name, nil)
		if err != nil {
			return c.Meta.errorf("Error reading node pool %s: %v", p.Name, err)
		}
		all = append(all, st)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(all)
	}
	if len(all) == 0 {
		c.Meta.UI.Output("No node pools with a scaling policy")
		return 0
	}
	rows := make([][]string, 0, len(all))
	for _, st := range all {
		s := st.Pool.Scaling
		last := "<none>"
		if len(st.Decisions) > 0 {
			last = st.Decisions[0].Reason
		}
		rows = append(rows, []string{st.Pool.Name, s.Provider, strconv.Itoa(st.Hosts), fmt.Sprintf("%d-%d", s.Min, s.Max),
			strconv.Itoa(len(st.Pending)), strconv.Itoa(len(st.Failed)), strconv.Itoa(len(st.Waiting)), last})
	}
	c.Meta.UI.Output(table([]string{"Name", "Provider", "Hosts", "Min-Max", "Pending", "Failed", "Waiting", "Last Decision"}, rows))
	return 0
}

// renderPool renders one pool's status.
func (c *NodePoolStatusCommand) renderPool(st *api.NodePoolStatus) string {
	var b strings.Builder
	pairs := [][2]string{{"Name", st.Pool.Name}, {"Hosts", strconv.Itoa(st.Hosts)}}
	if s := st.Pool.Scaling; s != nil {
		pairs = append(pairs,
			[2]string{"Provider", s.Provider},
			[2]string{"Min", strconv.Itoa(s.Min)}, [2]string{"Max", strconv.Itoa(s.Max)},
			[2]string{"Cooldown", s.Cooldown.String()}, [2]string{"Idle After", s.IdleAfter.String()})
	}
	b.WriteString(kv(pairs))
	b.WriteString("\n\nNodes\n")
	if len(st.Nodes) == 0 {
		b.WriteString("No nodes")
	} else {
		rows := make([][]string, 0, len(st.Nodes))
		for _, n := range st.Nodes {
			rows = append(rows, []string{n.Name, orNone(shortID(n.NodeID)), orNone(n.HostID), n.State, strconv.Itoa(n.Allocs)})
		}
		b.WriteString(table([]string{"Name", "Node ID", "Host ID", "State", "Allocs"}, rows))
	}
	b.WriteString("\n\nPending Requests\n")
	if len(st.Pending) == 0 {
		b.WriteString("No pending requests")
	} else {
		rows := make([][]string, 0, len(st.Pending))
		for _, r := range st.Pending {
			rows = append(rows, []string{shortID(r.ID), r.Op, r.Status, orNone(r.NodeName), strconv.Itoa(r.Attempts), c.Meta.formatTime(r.NextAttempt)})
		}
		b.WriteString(table([]string{"ID", "Op", "Status", "Node Name", "Attempts", "Next Attempt"}, rows))
	}
	b.WriteString("\n\nRecent Decisions\n")
	if len(st.Decisions) == 0 {
		b.WriteString("No decisions")
	} else {
		rows := make([][]string, 0, len(st.Decisions))
		for _, d := range st.Decisions {
			rows = append(rows, []string{c.Meta.formatTime(d.Time), d.Op, strconv.Itoa(d.Count), d.Reason})
		}
		b.WriteString(table([]string{"Time", "Op", "Count", "Reason"}, rows))
	}
	if len(st.Waiting) > 0 {
		b.WriteString("\n\nWaiting (blocked work this pool makes no hosts for)\n")
		b.WriteString(strings.Join(st.Waiting, "\n"))
	}
	b.WriteString("\n\nFailed Provider Calls\n")
	if len(st.Failed) == 0 {
		b.WriteString("No failed calls")
	} else {
		rows := make([][]string, 0, len(st.Failed))
		for _, r := range st.Failed {
			rows = append(rows, []string{shortID(r.ID), r.Op, r.Status, strconv.Itoa(r.Attempts), r.Error})
		}
		b.WriteString(table([]string{"ID", "Op", "Status", "Attempts", "Error"}, rows))
	}
	return b.String()
}
