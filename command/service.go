package command

import (
	"fmt"
	"strings"
)

// ServiceCommand groups the service subcommands; run alone it prints help.
type ServiceCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ServiceCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer service <subcommand> [options] [args]

  Inspect the services registered by running allocations (only instances
  whose checks pass are registered).
`)
}

// Synopsis returns a one-line description.
func (c *ServiceCommand) Synopsis() string { return "Interact with registered services" }

// Run prints help; see groupRun.
func (c *ServiceCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// ServiceListCommand lists the services.
type ServiceListCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ServiceListCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer service list [options]

  Lists the registered services of the namespace ("*": every namespace the
  token may read), with the tags of their instances.
` + generalOptions + namespaceOption + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ServiceListCommand) Synopsis() string { return "List registered services" }

// Run lists.
func (c *ServiceListCommand) Run(args []string) int {
	fs := c.Meta.flagSet("service list", true)
	c.Meta.namespaceFlag(fs)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	stubs, _, err := client.Services().List(nil)
	if err != nil {
		return c.Meta.errorf("Error listing services: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(stubs)
	}
	var rows [][]string
	for _, ns := range stubs {
		for _, s := range ns.Services {
			rows = append(rows, []string{s.ServiceName, ns.Namespace, "[" + strings.Join(s.Tags, ",") + "]"})
		}
	}
	if len(rows) == 0 {
		c.Meta.UI.Output("No services found")
		return 0
	}
	c.Meta.UI.Output(table([]string{"Service Name", "Namespace", "Tags"}, rows))
	return 0
}

// ServiceInfoCommand shows the instances of one service.
type ServiceInfoCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ServiceInfoCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer service info [options] NAME

  Shows every registered (healthy) instance of a service: its address,
  port, tags, job, node and allocation.
` + generalOptions + namespaceOption + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ServiceInfoCommand) Synopsis() string { return "Show the instances of a service" }

// Run shows the instances.
func (c *ServiceInfoCommand) Run(args []string) int {
	fs := c.Meta.flagSet("service info", true)
	c.Meta.namespaceFlag(fs)
	name, client, code := c.Meta.oneArg(fs, args, "the service name")
	if client == nil {
		return code
	}
	regs, _, err := client.Services().Get(name, nil)
	if err != nil {
		return c.Meta.errorf("Error reading service: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(regs)
	}
	if len(regs) == 0 {
		return c.Meta.errorf("No instances of service %q found", name)
	}
	rows := make([][]string, 0, len(regs))
	for _, r := range regs {
		rows = append(rows, []string{r.JobID, fmt.Sprintf("%s:%d", r.Address, r.Port), "[" + strings.Join(r.Tags, ",") + "]",
			shortID(r.NodeID), shortID(r.AllocID)})
	}
	c.Meta.UI.Output(table([]string{"Job ID", "Address", "Tags", "Node ID", "Alloc ID"}, rows))
	return 0
}
