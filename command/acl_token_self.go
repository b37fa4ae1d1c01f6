package command

import "strings"

// ACLTokenSelfCommand shows the token the CLI sends.
type ACLTokenSelfCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLTokenSelfCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl token self [options]

  Shows the token given by -token or GPULAYER_TOKEN (NOMAD_TOKEN).
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ACLTokenSelfCommand) Synopsis() string { return "Lookup self ACL token" }

// Run shows the token.
func (c *ACLTokenSelfCommand) Run(args []string) int {
	fs := c.Meta.flagSet("acl token self", true)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	t, _, err := client.ACLTokens().Self(nil)
	if err != nil {
		return c.Meta.errorf("Error fetching self token: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(t)
	}
	c.Meta.UI.Output(c.Meta.formatToken(t))
	return 0
}
