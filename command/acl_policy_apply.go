package command

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// maxPolicyFileBytes bounds the policy file read: the server takes 64 KiB.
const maxPolicyFileBytes = 64 << 10

// ACLPolicyApplyCommand creates or replaces a policy from an HCL file.
type ACLPolicyApplyCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLPolicyApplyCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl policy apply [options] NAME FILE

  Creates or replaces the policy NAME with the rules in FILE ("-" reads
  stdin), e.g.

      namespace "default" { policy = "read"  capabilities = ["read-logs"] }
      node { policy = "read" }

  Needs a management token.
` + generalOptions + `
Apply Options:

  -description=<text>
    The policy's description.
`)
}

// Synopsis returns a one-line description.
func (c *ACLPolicyApplyCommand) Synopsis() string { return "Create or update an ACL policy" }

// Run reads the file and upserts the policy.
func (c *ACLPolicyApplyCommand) Run(args []string) int {
	fs := c.Meta.flagSet("acl policy apply", false)
	var desc string
	fs.StringVar(&desc, "description", "", "")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 2 {
		c.Meta.UI.Error("This command takes two arguments: the policy name and the rules file")
		return 1
	}
	name, path := fs.Arg(0), fs.Arg(1)
	var rd io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return c.Meta.errorf("Error reading the policy file: %v", err)
		}
		defer f.Close()
		rd = f
	}
	rules, err := io.ReadAll(io.LimitReader(rd, maxPolicyFileBytes+1))
	if err != nil {
		return c.Meta.errorf("Error reading the policy file: %v", err)
	}
	if len(rules) > maxPolicyFileBytes {
		return c.Meta.errorf("Error: the policy file %s is larger than %d bytes", path, maxPolicyFileBytes)
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	if _, err := client.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Description: desc, Rules: string(rules)}, nil); err != nil {
		return c.Meta.errorf("Error writing ACL policy: %v", err)
	}
	c.Meta.UI.Output(fmt.Sprintf("Successfully wrote %q ACL policy!", name))
	return 0
}
