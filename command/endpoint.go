package command

import (
	"flag"
	"fmt"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// The endpoint commands (issue 14): the fleet view of model-serving
// endpoints and the promotion of aliases onto them.

// EndpointCommand groups the endpoint subcommands; run alone it prints
// help.
type EndpointCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *EndpointCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer endpoint <subcommand> [options] [args]

  Inspect model-serving endpoints (a service group's endpoint block: its
  members on one node behind that node's router) and promote aliases
  such as llm.primary onto them. Readiness is not promotion: a healthy
  endpoint serves an alias only once someone promotes it.
`)
}

// Synopsis returns a one-line description.
func (c *EndpointCommand) Synopsis() string { return "Interact with model-serving endpoints" }

// Run prints help; see groupRun.
func (c *EndpointCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// EndpointStatusCommand lists the endpoints or shows one.
type EndpointStatusCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *EndpointStatusCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer endpoint status [options] [ALIAS|NAME]

  Without an argument, lists the endpoints of the namespace ("*": every
  namespace the token may read): status, members admitted of total, node,
  job version and aliases. With an alias or an endpoint name, answers
  whether it is served anywhere, by what, on which host, how many members
  the router admits and which version they run, member by member.

  Status is "serving" (at least one member admitted), "degraded" (members
  run, none admitted), "down" (no member runs) or "stopped" (the job is
  stopped).
` + generalOptions + namespaceOption + jsonOption)
}

// Synopsis returns a one-line description.
func (c *EndpointStatusCommand) Synopsis() string {
	return "Show where endpoints run and how many members serve"
}

// Run lists or shows.
func (c *EndpointStatusCommand) Run(args []string) int {
	fs := c.Meta.flagSet("endpoint status", true)
	c.Meta.namespaceFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() > 1 {
		c.Meta.UI.Error("This command takes at most one argument: an alias or an endpoint name")
		return 1
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	if fs.NArg() == 0 {
		return c.list(client)
	}
	return c.info(client, fs.Arg(0))
}

func (c *EndpointStatusCommand) list(client *api.Client) int {
	list, _, err := client.Endpoints().List(nil)
	if err != nil {
		return c.Meta.errorf("Error listing endpoints: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(list)
	}
	if len(list) == 0 {
		c.Meta.UI.Output("No endpoints found")
		return 0
	}
	rows := make([][]string, 0, len(list))
	for _, e := range list {
		rows = append(rows, []string{e.Name, e.Namespace, e.Status, fmt.Sprintf("%d/%d", e.Admitted, e.Members), nodeLabel(e),
			e.JobID, fmt.Sprint(e.JobVersion), e.Model, listOrNone(e.Aliases)})
	}
	c.Meta.UI.Output(table([]string{"Endpoint", "Namespace", "Status", "Admitted", "Node", "Job", "Version", "Model", "Aliases"}, rows))
	return 0
}

func (c *EndpointStatusCommand) info(client *api.Client, name string) int {
	e, _, err := client.Endpoints().Info(name, nil)
	if err != nil {
		// The server's 404 says which: no such name, or an alias whose
		// endpoint no job declares any more.
		return c.Meta.errorf("Error reading endpoint or alias %q: %v", name, err)
	}
	var alias *api.EndpointAlias
	if e.Name != name {
		aliases, _, err := client.Endpoints().Aliases(nil)
		if err != nil {
			return c.Meta.errorf("Error reading aliases: %v", err)
		}
		for _, a := range aliases {
			if a.Name == name && a.Namespace == e.Namespace {
				alias = a
			}
		}
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(e)
	}
	var out strings.Builder
	if alias != nil {
		fmt.Fprintf(&out, "Alias %q resolves to endpoint %q (promoted by %s at %s)\n\n", alias.Name, e.Name, alias.PromotedBy, c.Meta.formatTime(alias.PromotedAt))
	}
	revision := e.Revision
	out.WriteString(kv([][2]string{
		{"Name", e.Name},
		{"Namespace", e.Namespace},
		{"Status", e.Status},
		{"Admitted", fmt.Sprintf("%d of %d members (count %d)", e.Admitted, e.Members, e.Count)},
		{"Node", nodeLabel(e)},
		{"Node ID", e.NodeID},
		{"Node Availability", e.NodeAvailability},
		{"Job ID", e.JobID},
		{"Job Version", fmt.Sprint(e.JobVersion)},
		{"Task Group", e.TaskGroup},
		{"Model", e.Model},
		{"Revision", revision},
		{"Port", fmt.Sprint(e.Port)},
		{"Aliases", listOrNone(e.Aliases)},
	}))
	if len(e.MemberList) > 0 {
		rows := make([][]string, 0, len(e.MemberList))
		for _, m := range e.MemberList {
			reason := m.Reason
			if reason == "" {
				reason = "-"
			}
			rows = append(rows, []string{shortID(m.AllocID), fmt.Sprint(m.Index), m.ClientStatus, fmt.Sprint(m.Admitted),
				fmt.Sprint(m.Identity.JobVersion), digestOrNone(m.Identity.ArtifactDigest), reason})
		}
		out.WriteString("\n\nMembers\n")
		out.WriteString(table([]string{"Alloc ID", "Index", "Status", "Admitted", "Version", "Artifact", "Reason"}, rows))
	}
	c.Meta.UI.Output(out.String())
	return 0
}

// nodeLabel names an endpoint's node: its name, or "<none>" when no
// member is placed.
func nodeLabel(e *api.EndpointView) string {
	switch {
	case e.NodeName != "":
		return e.NodeName
	case e.NodeID != "":
		return shortID(e.NodeID)
	}
	return "<none>"
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "<none>"
	}
	return strings.Join(l, ",")
}

// digestOrNone shortens "sha256:<hex>" to its first 12 hex digits.
func digestOrNone(d string) string {
	if d == "" {
		return "<none>"
	}
	if i := strings.IndexByte(d, ':'); i >= 0 && len(d) > i+13 {
		return d[:i+13]
	}
	return d
}

// EndpointPromoteCommand points an alias at an endpoint.
type EndpointPromoteCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *EndpointPromoteCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer endpoint promote [options] ALIAS -endpoint NAME

  Points ALIAS (lowercase letters, digits, '.' and '-', at most 63 bytes)
  at endpoint NAME, recorded in Raft with who and when; the alias leaves
  the endpoint it resolved to at the same moment. Refused when the
  endpoint has no placed member, or when its node is opportunistic: only
  a continuous node may back a promoted alias. Needs submit-job in the
  namespace.

Promote Options:

  -endpoint=<name>
    The endpoint the alias resolves to (required).
` + generalOptions + namespaceOption + jsonOption)
}

// Synopsis returns a one-line description.
func (c *EndpointPromoteCommand) Synopsis() string { return "Point an alias at an endpoint" }

// Run promotes.
func (c *EndpointPromoteCommand) Run(args []string) int {
	fs := c.Meta.flagSet("endpoint promote", true)
	c.Meta.namespaceFlag(fs)
	endpoint := fs.String("endpoint", "", "")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return 1
	}
	if len(rest) != 1 || strings.TrimSpace(rest[0]) == "" {
		c.Meta.UI.Error("This command takes one argument: the alias")
		return 1
	}
	if *endpoint == "" {
		c.Meta.UI.Error("Missing -endpoint: name the endpoint the alias resolves to")
		return 1
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	a, _, err := client.Endpoints().Promote(rest[0], *endpoint, nil)
	if err != nil {
		return c.Meta.errorf("Error promoting alias %q onto endpoint %q: %v", rest[0], *endpoint, err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(a)
	}
	c.Meta.UI.Output(fmt.Sprintf("Alias %q now resolves to endpoint %q (job %q, promoted by %s at index %d)", a.Name, a.Endpoint, a.JobID, a.PromotedBy, a.ModifyIndex))
	return 0
}

// EndpointDemoteCommand removes an alias.
type EndpointDemoteCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *EndpointDemoteCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer endpoint demote [options] ALIAS

  Removes ALIAS: it resolves to no endpoint any more. The endpoint keeps
  serving on its own name. Needs submit-job in the namespace.
` + generalOptions + namespaceOption)
}

// Synopsis returns a one-line description.
func (c *EndpointDemoteCommand) Synopsis() string { return "Remove an alias" }

// Run demotes.
func (c *EndpointDemoteCommand) Run(args []string) int {
	fs := c.Meta.flagSet("endpoint demote", false)
	c.Meta.namespaceFlag(fs)
	alias, client, code := c.Meta.oneArg(fs, args, "the alias")
	if client == nil {
		return code
	}
	if _, err := client.Endpoints().Demote(alias, nil); err != nil {
		return c.Meta.errorf("Error demoting alias %q: %v", alias, err)
	}
	c.Meta.UI.Output(fmt.Sprintf("Alias %q demoted", alias))
	return 0
}

// parseInterspersed parses fs over args, allowing options after the
// positional arguments ("promote llm.primary -endpoint llm-70b"), and
// returns the positional arguments in order. "--" ends the options.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if used := len(args) - len(left); used > 0 && args[used-1] == "--" {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}
