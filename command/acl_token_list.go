package command

import (
	"strings"
	"time"
)

// ACLTokenListCommand lists the tokens.
type ACLTokenListCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLTokenListCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl token list [options]

  Lists every token without its secret (management token needed).
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ACLTokenListCommand) Synopsis() string { return "List ACL tokens" }

// Run lists.
func (c *ACLTokenListCommand) Run(args []string) int {
	fs := c.Meta.flagSet("acl token list", true)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	ts, _, err := client.ACLTokens().List(nil)
	if err != nil {
		return c.Meta.errorf("Error listing tokens: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(ts)
	}
	if len(ts) == 0 {
		c.Meta.UI.Output("No tokens found")
		return 0
	}
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		exp := "<none>"
		if t.ExpirationTime != nil {
			exp = t.ExpirationTime.In(c.Meta.Location).Format(time.RFC3339)
		}
		rows = append(rows, []string{orNone(t.Name), t.Type, t.AccessorID, orNone(strings.Join(t.Policies, ",")), exp})
	}
	c.Meta.UI.Output(table([]string{"Name", "Type", "Accessor ID", "Policies", "Expires"}, rows))
	return 0
}
