package command

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// NodeStatusCommand lists nodes or shows one node with its attributes,
// resources and GPU instances.
type NodeStatusCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodeStatusCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node status [options] [NODE]

  Without NODE, lists every client node with its GPU count, whether it is
  being drained and whether it takes new allocations. With a node ID or
  unique ID prefix, shows its attributes, resources and each GPU instance:
  ID, model, memory, health and the allocation holding it.
` + generalOptions + `
Status Options:

  -verbose
    Without NODE, list each node's GPUs under it. With telemetry from the
    agent's own client, add each GPU's utilisation and memory in use.
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *NodeStatusCommand) Synopsis() string { return "Display status information about nodes" }

// Run lists nodes or shows one.
func (c *NodeStatusCommand) Run(args []string) int {
	fs := c.Meta.flagSet("node status", true)
	fs.BoolVar(&c.Meta.verbose, "verbose", false, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() > 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes at most one argument: the node ID")
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	prefix := fs.Arg(0)
	nodes, _, err := client.Nodes().List(&api.QueryOptions{Prefix: prefix})
	if err != nil {
		return c.Meta.errorf("Error querying nodes: %v", err)
	}
	if prefix == "" {
		if c.Meta.jsonOutput {
			return c.Meta.printJSON(nodes)
		}
		if len(nodes) == 0 {
			c.Meta.UI.Output("No nodes registered")
			return 0
		}
		c.Meta.UI.Output(nodeList(nodes))
		if c.Meta.verbose {
			c.Meta.UI.Output(c.Meta.nodesGPUs(client, nodes))
		}
		return 0
	}
	var pick *api.Node
	for _, n := range nodes {
		if n.ID == prefix {
			pick = n
		}
	}
	if pick == nil {
		switch len(nodes) {
		case 0:
			return c.Meta.errorf("No node(s) with prefix or ID %q found", prefix)
		case 1:
			pick = nodes[0]
		default:
			c.Meta.UI.Error(fmt.Sprintf("Prefix matched multiple nodes\n\n%s", nodeList(nodes)))
			return 1
		}
	}
	return c.Meta.showNode(client, pick.ID)
}

// nodeList renders the nodes table.
func nodeList(nodes []*api.Node) string {
	sort.Slice(nodes, func(i, j int) bool {
		return nodes[i].Name < nodes[j].Name || (nodes[i].Name == nodes[j].Name && nodes[i].ID < nodes[j].ID)
	})
	rows := make([][]string, len(nodes))
	for i, n := range nodes {
		rows[i] = []string{shortID(n.ID), n.Datacenter, n.Name, orNone(n.NodeClass), orNone(healthyDrivers(n)), strconv.Itoa(gpuCount(n)), strconv.FormatBool(n.Drain), n.SchedulingEligibility, n.Status}
	}
	return table([]string{"ID", "DC", "Name", "Class", "Drivers", "GPUs", "Drain", "Eligibility", "Status"}, rows)
}

// healthyDrivers lists the node's healthy drivers, comma-separated.
func healthyDrivers(n *api.Node) string {
	var out []string
	for _, name := range sortedKeys(n.Drivers) {
		if d := n.Drivers[name]; d != nil && d.Healthy {
			out = append(out, name)
		}
	}
	return strings.Join(out, ",")
}

// gpuCount counts the node's GPU instances.
func gpuCount(n *api.Node) int {
	if n.NodeResources == nil {
		return 0
	}
	c := 0
	for _, g := range n.NodeResources.Devices {
		if g != nil && g.Type == "gpu" {
			c += len(g.Instances)
		}
	}
	return c
}

// showNode prints one node and which allocation holds each GPU.
func (m *Meta) showNode(client *api.Client, id string) int {
	node, _, err := client.Nodes().Info(id, nil)
	if err != nil {
		return m.errorf("Error querying node %q: %v", id, err)
	}
	if m.jsonOutput {
		return m.printJSON(node)
	}
	allocs, _, err := client.Allocations().List(nil)
	if err != nil {
		return m.errorf("Error querying allocations: %v", err)
	}
	holder := gpuHolders(allocs)
	var sb strings.Builder
	sb.WriteString(kv([][2]string{
		{"ID", node.ID},
		{"Name", node.Name},
		{"Class", node.NodeClass},
		{"DC", node.Datacenter},
		{"Address", node.HTTPAddr},
		{"Drivers", healthyDrivers(node)},
		{"Status", node.Status},
		{"Status Description", node.StatusDescription},
		{"Drain", strconv.FormatBool(node.Drain)},
		{"Eligibility", node.SchedulingEligibility},
	}))
	if len(node.Attributes) > 0 {
		sb.WriteString("\n\nAttributes\n")
		pairs := make([][2]string, 0, len(node.Attributes))
		for _, k := range sortedKeys(node.Attributes) {
			pairs = append(pairs, [2]string{k, node.Attributes[k]})
		}
		sb.WriteString(kv(pairs))
	}
	if r := node.NodeResources; r != nil {
		sb.WriteString("\n\nResources\n")
		row := []string{fmt.Sprintf("%d MHz", r.Cpu.CpuShares), strconv.Itoa(int(r.Cpu.TotalCpuCores)), fmt.Sprintf("%d MiB", r.Memory.MemoryMB), "0 MHz", "0 MiB"}
		if rr := node.ReservedResources; rr != nil {
			row[3], row[4] = fmt.Sprintf("%d MHz", rr.Cpu.CpuShares), fmt.Sprintf("%d MiB", rr.Memory.MemoryMB)
		}
		sb.WriteString(table([]string{"CPU", "Cores", "Memory", "Reserved CPU", "Reserved Memory"}, [][]string{row}))
		sb.WriteString("\n\nDevices\n")
		sb.WriteString(gpuTable(node, holder, m.localTelemetry(client, node.ID)))
	}
	m.UI.Output(sb.String())
	return 0
}
