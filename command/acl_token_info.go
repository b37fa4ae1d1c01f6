package command

import "strings"

// ACLTokenInfoCommand shows one token.
type ACLTokenInfoCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLTokenInfoCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl token info [options] ACCESSOR_ID

  Shows a token (management token, or the token itself). The Secret ID is
  shown to those two only.
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ACLTokenInfoCommand) Synopsis() string { return "Fetch information on an ACL token" }

// Run shows the token.
func (c *ACLTokenInfoCommand) Run(args []string) int {
	id, client, code := c.Meta.oneArg(c.Meta.flagSet("acl token info", true), args, "the token's accessor ID")
	if client == nil {
		return code
	}
	t, _, err := client.ACLTokens().Info(id, nil)
	if err != nil {
		return c.Meta.errorf("Error fetching token: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(t)
	}
	c.Meta.UI.Output(c.Meta.formatToken(t))
	return 0
}
