package command

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
)

// NodePoolCommand groups the node pool subcommands; run alone it prints
// help.
type NodePoolCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodePoolCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node pool <subcommand> [options] [args]

  Interact with node pools: named sets of nodes that jobs are placed in
  (a job's node_pool, a client's node_pool). The pools "default" and
  "all" always exist. A pool may carry a scaling policy that makes hosts
  on demand.
`)
}

// Synopsis returns a one-line description.
func (c *NodePoolCommand) Synopsis() string { return "Interact with node pools" }

// Run prints help; see groupRun.
func (c *NodePoolCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// NodePoolApplyCommand creates or replaces a pool from a specification
// file.
type NodePoolApplyCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodePoolApplyCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node pool apply [options] FILE

  Creates or replaces the node pool in FILE ("-" reads stdin), e.g.

      node_pool "gpu" {
        description = "A100 hosts on demand"
        meta { team = "ml" }
        scaling {
          provider   = "docker"
          min        = 0
          max        = 4
          cooldown   = "30s"
          idle_after = "2m"
          config { image = "gpulayer:dev" }
          shape {
            node_class = "a100"
            gpu_count  = 1
          }
          idle {
            no_allocations = true
            gpu_util_below = 5
            gpu_util_for   = "10m"
          }
        }
      }

  Needs operator write.
` + generalOptions)
}

// Synopsis returns a one-line description.
func (c *NodePoolApplyCommand) Synopsis() string { return "Create or update a node pool" }

// Run parses the file and writes the pool.
func (c *NodePoolApplyCommand) Run(args []string) int {
	path, client, code := c.Meta.oneArg(c.Meta.flagSet("node pool apply", false), args, "the node pool specification file")
	if client == nil {
		return code
	}
	pool, err := jobspec.ParseNodePoolFile(path, os.Stdin)
	if err != nil {
		return c.Meta.errorf("Error parsing the node pool specification:\n%v", err)
	}
	if _, err := client.NodePools().Register(pool, nil); err != nil {
		return c.Meta.errorf("Error applying node pool: %v", err)
	}
	c.Meta.UI.Output(fmt.Sprintf("Successfully applied node pool %q!", pool.Name))
	return 0
}

// NodePoolListCommand lists the pools.
type NodePoolListCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodePoolListCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node pool list [options]

  Lists the node pools, the built-in "all" and "default" included.
` + generalOptions + jsonOption + `
List Options:

  -prefix=<name>
    Only the pools whose name starts with the prefix.
`)
}

// Synopsis returns a one-line description.
func (c *NodePoolListCommand) Synopsis() string { return "List node pools" }

// Run lists.
func (c *NodePoolListCommand) Run(args []string) int {
	fs := c.Meta.flagSet("node pool list", true)
	var prefix string
	fs.StringVar(&prefix, "prefix", "", "")
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	pools, _, err := client.NodePools().PrefixList(prefix, nil)
	if err != nil {
		return c.Meta.errorf("Error listing node pools: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(pools)
	}
	if len(pools) == 0 {
		c.Meta.UI.Output("No node pools found")
		return 0
	}
	rows := make([][]string, 0, len(pools))
	for _, p := range pools {
		rows = append(rows, []string{p.Name, scalingSummary(p.Scaling), orNone(p.Description)})
	}
	c.Meta.UI.Output(table([]string{"Name", "Scaling", "Description"}, rows))
	return 0
}

// scalingSummary is a pool's scaling policy in a few words.
func scalingSummary(s *api.NodePoolScalingPolicy) string {
	if s == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s %d-%d", s.Provider, s.Min, s.Max)
}

// NodePoolInfoCommand shows one pool.
type NodePoolInfoCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodePoolInfoCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node pool info [options] NAME

  Shows a node pool: its description, metadata and scaling policy.
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *NodePoolInfoCommand) Synopsis() string { return "Show a node pool" }

// Run shows the pool.
func (c *NodePoolInfoCommand) Run(args []string) int {
	name, client, code := c.Meta.oneArg(c.Meta.flagSet("node pool info", true), args, "the node pool name")
	if client == nil {
		return code
	}
	p, _, err := client.NodePools().Info(name, nil)
	if err != nil {
		return c.Meta.errorf("Error reading node pool: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(p)
	}
	c.Meta.UI.Output(kv([][2]string{{"Name", p.Name}, {"Description", orNone(p.Description)}}))
	if len(p.Meta) > 0 {
		keys := make([]string, 0, len(p.Meta))
		for k := range p.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([][2]string, 0, len(keys))
		for _, k := range keys {
			pairs = append(pairs, [2]string{k, p.Meta[k]})
		}
		c.Meta.UI.Output("\nMetadata\n" + kv(pairs))
	}
	s := p.Scaling
	if s == nil {
		c.Meta.UI.Output("\nScaling = <none>")
		return 0
	}
	c.Meta.UI.Output("\nScaling\n" + kv([][2]string{
		{"Provider", s.Provider},
		{"Min", fmt.Sprint(s.Min)},
		{"Max", fmt.Sprint(s.Max)},
		{"Cooldown", s.Cooldown.String()},
		{"Idle After", s.IdleAfter.String()},
		{"Node Class", orNone(s.Shape.NodeClass)},
		{"GPU Model", orNone(s.Shape.GPUModel)},
		{"GPU Count", fmt.Sprint(s.Shape.GPUCount)},
		{"GPU Memory", fmt.Sprintf("%d MiB", s.Shape.GPUMemoryMB)},
		{"Memory Model", orNone(s.Shape.MemoryModel)},
		{"Availability", orNone(s.Shape.Availability)},
		{"Idle Rule", idleSummary(s.Idle)},
	}))
	if len(s.ProviderConfig) > 0 {
		keys := make([]string, 0, len(s.ProviderConfig))
		for k := range s.ProviderConfig {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([][2]string, 0, len(keys))
		for _, k := range keys {
			pairs = append(pairs, [2]string{k, s.ProviderConfig[k]})
		}
		c.Meta.UI.Output("\nProvider Config\n" + kv(pairs))
	}
	return 0
}

// idleSummary says when a node of the pool counts as idle.
func idleSummary(r api.NodePoolIdleRule) string {
	var parts []string
	if r.NoAllocations {
		parts = append(parts, "no allocations")
	}
	if r.GPUUtilBelowPercent > 0 {
		parts = append(parts, fmt.Sprintf("GPU utilisation below %d%% for %s", r.GPUUtilBelowPercent, r.GPUUtilFor))
	}
	if len(parts) == 0 {
		return "<none>"
	}
	return strings.Join(parts, " and ")
}

// NodePoolDeleteCommand deletes a pool.
type NodePoolDeleteCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodePoolDeleteCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node pool delete [options] NAME

  Deletes a node pool. The built-in pools, and a pool that a node or a
  live job is in, cannot be deleted. Needs operator write.
` + generalOptions)
}

// Synopsis returns a one-line description.
func (c *NodePoolDeleteCommand) Synopsis() string { return "Delete a node pool" }

// Run deletes the pool.
func (c *NodePoolDeleteCommand) Run(args []string) int {
	name, client, code := c.Meta.oneArg(c.Meta.flagSet("node pool delete", false), args, "the node pool name")
	if client == nil {
		return code
	}
	if _, err := client.NodePools().Delete(name, nil); err != nil {
		return c.Meta.errorf("Error deleting node pool: %v", err)
	}
	c.Meta.UI.Output(fmt.Sprintf("Successfully deleted node pool %q!", name))
	return 0
}

// NodePoolNodesCommand lists a pool's nodes.
type NodePoolNodesCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodePoolNodesCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node pool nodes [options] NAME

  Lists the nodes of a node pool ("all": every node).
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *NodePoolNodesCommand) Synopsis() string { return "List the nodes of a node pool" }

// Run lists.
func (c *NodePoolNodesCommand) Run(args []string) int {
	name, client, code := c.Meta.oneArg(c.Meta.flagSet("node pool nodes", true), args, "the node pool name")
	if client == nil {
		return code
	}
	nodes, _, err := client.NodePools().ListNodes(name, nil)
	if err != nil {
		return c.Meta.errorf("Error listing the nodes of node pool %q: %v", name, err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(nodes)
	}
	if len(nodes) == 0 {
		c.Meta.UI.Output(fmt.Sprintf("No nodes in node pool %q", name))
		return 0
	}
	rows := make([][]string, 0, len(nodes))
	for _, n := range nodes {
		rows = append(rows, []string{shortID(n.ID), n.Datacenter, n.Name, n.NodePool, orNone(n.NodeClass), n.Status})
	}
	c.Meta.UI.Output(table([]string{"ID", "DC", "Name", "Pool", "Class", "Status"}, rows))
	return 0
}

// NodePoolJobsCommand lists a pool's jobs.
type NodePoolJobsCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodePoolJobsCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node pool jobs [options] NAME

  Lists the jobs of a node pool that the token may read ("all": the jobs
  that asked for every node).
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *NodePoolJobsCommand) Synopsis() string { return "List the jobs of a node pool" }

// Run lists.
func (c *NodePoolJobsCommand) Run(args []string) int {
	name, client, code := c.Meta.oneArg(c.Meta.flagSet("node pool jobs", true), args, "the node pool name")
	if client == nil {
		return code
	}
	jobs, _, err := client.NodePools().ListJobs(name, nil)
	if err != nil {
		return c.Meta.errorf("Error listing the jobs of node pool %q: %v", name, err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(jobs)
	}
	if len(jobs) == 0 {
		c.Meta.UI.Output(fmt.Sprintf("No jobs in node pool %q", name))
		return 0
	}
	rows := make([][]string, 0, len(jobs))
	for _, j := range jobs {
		rows = append(rows, []string{j.ID, j.Namespace, j.Type, fmt.Sprint(j.Priority), j.Status})
	}
	c.Meta.UI.Output(table([]string{"ID", "Namespace", "Type", "Priority", "Status"}, rows))
	return 0
}
