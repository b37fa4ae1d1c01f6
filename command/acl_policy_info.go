package command

import (
	"fmt"
	"strings"
)

// ACLPolicyInfoCommand shows one policy.
type ACLPolicyInfoCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLPolicyInfoCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl policy info [options] NAME

  Shows a policy and its rules (management, or a token holding it).
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ACLPolicyInfoCommand) Synopsis() string { return "Fetch info on an ACL policy" }

// Run shows the policy.
func (c *ACLPolicyInfoCommand) Run(args []string) int {
	name, client, code := c.Meta.oneArg(c.Meta.flagSet("acl policy info", true), args, "the policy name")
	if client == nil {
		return code
	}
	p, _, err := client.ACLPolicies().Info(name, nil)
	if err != nil {
		return c.Meta.errorf("Error reading ACL policy: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(p)
	}
	c.Meta.UI.Output(kv([][2]string{
		{"Name", p.Name}, {"Description", p.Description},
		{"CreateIndex", fmt.Sprint(p.CreateIndex)}, {"ModifyIndex", fmt.Sprint(p.ModifyIndex)},
	}))
	c.Meta.UI.Output("\nRules\n\n" + strings.TrimSpace(p.Rules))
	return 0
}
