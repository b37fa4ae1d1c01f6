package agent

import (
	"strings"
	"testing"
)

// TestConfigProvision: the server's provisioning settings merge, and an
// oversized join token is refused naming the field.
func TestConfigProvision(t *testing.T) {
	c := DefaultConfig()
	c.Merge(&Config{Server: &ServerConfig{Enabled: true, ProvisionJoinToken: "tok", DisableProvisioning: true}})
	if c.Server.ProvisionJoinToken != "tok" || !c.Server.DisableProvisioning {
		t.Fatalf("merged = %+v", c.Server)
	}
	c.Server.ProvisionJoinToken = strings.Repeat("x", maxACLTokenLen+1)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "server.provision_join_token") {
		t.Fatalf("Validate = %v", err)
	}
}
