package command

import "strings"

// ACLBootstrapCommand creates the first management token.
type ACLBootstrapCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLBootstrapCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl bootstrap [options]

  Creates the first management token of a cluster whose ACLs are on (the
  default outside -dev). It works once; keep the Secret ID safe: it may do
  anything.
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ACLBootstrapCommand) Synopsis() string { return "Bootstrap the ACL system" }

// Run bootstraps and prints the token.
func (c *ACLBootstrapCommand) Run(args []string) int {
	fs := c.Meta.flagSet("acl bootstrap", true)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	tok, _, err := client.ACLTokens().Bootstrap(nil)
	if err != nil {
		return c.Meta.errorf("Error bootstrapping: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(tok)
	}
	c.Meta.UI.Output(c.Meta.formatToken(tok))
	return 0
}
