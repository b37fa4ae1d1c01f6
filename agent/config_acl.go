package agent

import "fmt"

// ACLConfig is the agent's acl block:
//
//	acl {
//	  enabled = true   # default: true outside -dev, false in -dev
//	  token   = "..."  # client agents: the token sent to register the node
//	}
//
// enabled is Nomad's field; GPUlayer turns ACLs on by default outside dev
// mode, and an agent started with them off logs a warning. token is a
// GPUlayer addition: the secret of a token with node write rights (a
// policy with `node { policy = "write" }`) that a client-only agent sends
// when it registers its node; the node then authenticates with its own
// node secret.
type ACLConfig struct {
	Enabled *bool  `hcl:"enabled,optional"`
	Token   string `hcl:"token,optional"`
}

// maxACLTokenLen bounds acl.token, in bytes.
const maxACLTokenLen = 256

// ACLEnabled reports whether the agent checks ACL tokens: acl.enabled
// when set, else true outside dev mode.
func (c *Config) ACLEnabled() bool {
	if c.ACL != nil && c.ACL.Enabled != nil {
		return *c.ACL.Enabled
	}
	return !c.DevMode
}

// ACLToken returns acl.token, "" when unset.
func (c *Config) ACLToken() string {
	if c.ACL == nil {
		return ""
	}
	return c.ACL.Token
}

func (c *Config) mergeACL(o *ACLConfig) {
	if o == nil {
		return
	}
	if c.ACL == nil {
		c.ACL = &ACLConfig{}
	}
	if o.Enabled != nil {
		v := *o.Enabled
		c.ACL.Enabled = &v
	}
	if o.Token != "" {
		c.ACL.Token = o.Token
	}
}

func (c *Config) validateACL() []string {
	if c.ACL == nil {
		return nil
	}
	if len(c.ACL.Token) > maxACLTokenLen {
		return []string{fmt.Sprintf("acl.token: %d bytes, at most %d", len(c.ACL.Token), maxACLTokenLen)}
	}
	return nil
}
