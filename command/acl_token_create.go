package command

import (
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// ACLTokenCreateCommand creates a token.
type ACLTokenCreateCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLTokenCreateCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl token create [options]

  Creates a token (management token needed) and prints it with its
  Secret ID, the only time a token other than itself sees it.
` + generalOptions + `
Create Options:

  -name=<name>
    The token's name.

  -type=client|management
    The token's type. Default: client.

  -policy=<name>
    A policy the token holds; repeat for several. A client token needs
    at least one.

  -ttl=<duration>
    The token expires this long after creation, e.g. 8h. Default: never.
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ACLTokenCreateCommand) Synopsis() string { return "Create a new ACL token" }

// Run creates the token.
func (c *ACLTokenCreateCommand) Run(args []string) int {
	fs := c.Meta.flagSet("acl token create", true)
	var name, typ, ttl string
	var policies listFlag
	fs.StringVar(&name, "name", "", "")
	fs.StringVar(&typ, "type", "client", "")
	fs.Var(&policies, "policy", "")
	fs.StringVar(&ttl, "ttl", "", "")
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	tok := &api.ACLToken{Name: name, Type: typ, Policies: policies}
	if ttl != "" {
		d, err := time.ParseDuration(ttl)
		if err != nil || d <= 0 {
			return c.Meta.errorf("Error: -ttl: %q is not a positive duration such as 8h", ttl)
		}
		tok.ExpirationTTL = d
	}
	out, _, err := client.ACLTokens().Create(tok, nil)
	if err != nil {
		return c.Meta.errorf("Error creating token: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(out)
	}
	c.Meta.UI.Output(c.Meta.formatToken(out))
	return 0
}
