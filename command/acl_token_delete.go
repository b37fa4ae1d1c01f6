package command

import (
	"fmt"
	"strings"
)

// ACLTokenDeleteCommand removes a token.
type ACLTokenDeleteCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLTokenDeleteCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl token delete [options] ACCESSOR_ID

  Deletes a token (management token needed); it stops working at once on
  servers and within 30 seconds on client-only agents.
` + generalOptions)
}

// Synopsis returns a one-line description.
func (c *ACLTokenDeleteCommand) Synopsis() string { return "Delete an existing ACL token" }

// Run deletes the token.
func (c *ACLTokenDeleteCommand) Run(args []string) int {
	id, client, code := c.Meta.oneArg(c.Meta.flagSet("acl token delete", false), args, "the token's accessor ID")
	if client == nil {
		return code
	}
	if _, err := client.ACLTokens().Delete(id, nil); err != nil {
		return c.Meta.errorf("Error deleting token: %v", err)
	}
	c.Meta.UI.Output(fmt.Sprintf("Token %s successfully deleted", id))
	return 0
}
