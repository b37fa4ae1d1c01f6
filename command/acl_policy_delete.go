package command

import (
	"fmt"
	"strings"
)

// ACLPolicyDeleteCommand removes a policy.
type ACLPolicyDeleteCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLPolicyDeleteCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl policy delete [options] NAME

  Deletes a policy (management token). Tokens naming it lose its rights.
` + generalOptions)
}

// Synopsis returns a one-line description.
func (c *ACLPolicyDeleteCommand) Synopsis() string { return "Delete an ACL policy" }

// Run deletes the policy.
func (c *ACLPolicyDeleteCommand) Run(args []string) int {
	name, client, code := c.Meta.oneArg(c.Meta.flagSet("acl policy delete", false), args, "the policy name")
	if client == nil {
		return code
	}
	if _, err := client.ACLPolicies().Delete(name, nil); err != nil {
		return c.Meta.errorf("Error deleting ACL policy: %v", err)
	}
	c.Meta.UI.Output(fmt.Sprintf("Successfully deleted %q ACL policy!", name))
	return 0
}
