package command

import "strings"

// ACLPolicyListCommand lists the policies.
type ACLPolicyListCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLPolicyListCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl policy list [options]

  Lists the policies: all of them for a management token, the token's own
  otherwise.
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ACLPolicyListCommand) Synopsis() string { return "List ACL policies" }

// Run lists.
func (c *ACLPolicyListCommand) Run(args []string) int {
	fs := c.Meta.flagSet("acl policy list", true)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	ps, _, err := client.ACLPolicies().List(nil)
	if err != nil {
		return c.Meta.errorf("Error listing ACL policies: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(ps)
	}
	if len(ps) == 0 {
		c.Meta.UI.Output("No policies found")
		return 0
	}
	rows := make([][]string, 0, len(ps))
	for _, p := range ps {
		rows = append(rows, []string{p.Name, orNone(p.Description)})
	}
	c.Meta.UI.Output(table([]string{"Name", "Description"}, rows))
	return 0
}
