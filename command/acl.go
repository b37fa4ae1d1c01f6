package command

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// ACLCommand groups the acl subcommands; run alone it prints help.
type ACLCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl <subcommand> [options]

  Bootstrap the ACL system and manage its policies and tokens, as Nomad's
  "nomad acl" does:

      gpulayer acl bootstrap
      gpulayer acl policy apply -description "read only" readonly readonly.hcl
      gpulayer acl token create -name alice -policy readonly
`)
}

// Synopsis returns a one-line description.
func (c *ACLCommand) Synopsis() string { return "Interact with ACL policies and tokens" }

// Run prints help; see groupRun.
func (c *ACLCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// ACLPolicyCommand groups the acl policy subcommands.
type ACLPolicyCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLPolicyCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl policy <subcommand> [options]

  Manage ACL policies: apply, list, info, delete.
`)
}

// Synopsis returns a one-line description.
func (c *ACLPolicyCommand) Synopsis() string { return "Interact with ACL policies" }

// Run prints help.
func (c *ACLPolicyCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// ACLTokenCommand groups the acl token subcommands.
type ACLTokenCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ACLTokenCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer acl token <subcommand> [options]

  Manage ACL tokens: create, list, info, self, delete.
`)
}

// Synopsis returns a one-line description.
func (c *ACLTokenCommand) Synopsis() string { return "Interact with ACL tokens" }

// Run prints help.
func (c *ACLTokenCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// formatToken renders a token as Nomad's CLI does.
func (m *Meta) formatToken(t *api.ACLToken) string {
	exp := "<none>"
	if t.ExpirationTime != nil {
		exp = t.ExpirationTime.In(m.Location).Format(time.RFC3339)
	}
	secret := t.SecretID
	if secret == "" {
		secret = "<hidden>"
	}
	return kv([][2]string{
		{"Accessor ID", t.AccessorID},
		{"Secret ID", secret},
		{"Name", t.Name},
		{"Type", t.Type},
		{"Global", fmt.Sprint(t.Global)},
		{"Policies", strings.Join(t.Policies, ", ")},
		{"Create Time", t.CreateTime.In(m.Location).Format(time.RFC3339)},
		{"Expiry Time", exp},
		{"Create Index", fmt.Sprint(t.CreateIndex)},
		{"Modify Index", fmt.Sprint(t.ModifyIndex)},
	})
}

// oneArg parses args with fs for a command taking exactly one argument,
// named what in the error.
func (m *Meta) oneArg(fs interface {
	Parse([]string) error
	Args() []string
}, args []string, what string) (string, *api.Client, int) {
	if err := fs.Parse(args); err != nil {
		return "", nil, 1
	}
	rest := fs.Args()
	if len(rest) != 1 || strings.TrimSpace(rest[0]) == "" {
		m.UI.Error(fmt.Sprintf("This command takes one argument: %s", what))
		return "", nil, 1
	}
	client, err := m.client()
	if err != nil {
		return "", nil, m.errorf("Error initializing client: %v", err)
	}
	return rest[0], client, 0
}
