package agent

import (
	"os"
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

// TestConfigProvisionAllowLists: the provider allow-lists parse from HCL,
// merge (a later file replaces a list) and reach the server's config; a
// relative or unclean program path, a bad image and too many entries are
// refused naming the field.
func TestConfigProvisionAllowLists(t *testing.T) {
	c := DefaultConfig()
	c.Merge(&Config{Server: &ServerConfig{Enabled: true, ProvisionExecCommands: []string{"/opt/a"}}})
	c.Merge(&Config{Server: &ServerConfig{ProvisionExecCommands: []string{"/opt/b"}, ProvisionDockerImages: []string{"gpulayer-host:x"},
		ProvisionDockerBinaries: []string{"/opt/gpulayer"}, ProvisionExecPassEnv: []string{"AWS_PROFILE"}}})
	if got := c.Server.ProvisionExecCommands; len(got) != 1 || got[0] != "/opt/b" || c.Server.ProvisionDockerImages[0] != "gpulayer-host:x" ||
		c.Server.ProvisionDockerBinaries[0] != "/opt/gpulayer" || len(c.Server.ProvisionExecPassEnv) != 1 || c.Server.ProvisionExecPassEnv[0] != "AWS_PROFILE" {
		t.Fatalf("merged = %+v", c.Server)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	for name, mut := range map[string]func(*ServerConfig){
		"server.provision_exec_commands[0]":                     func(s *ServerConfig) { s.ProvisionExecCommands = []string{"bin/sh"} },
		"server.provision_docker_binaries[0]":                   func(s *ServerConfig) { s.ProvisionDockerBinaries = []string{"/opt/../bin/sh"} },
		"server.provision_docker_images[0]":                     func(s *ServerConfig) { s.ProvisionDockerImages = []string{"Bad Image"} },
		"server.provision_exec_commands:":                       func(s *ServerConfig) { s.ProvisionExecCommands = make([]string, maxProvisionAllow+1) },
		"server.provision_exec_pass_env[1]":                     func(s *ServerConfig) { s.ProvisionExecPassEnv = []string{"HOME", "A=B"} },
		"server.provision_exec_pass_env[0]: \"gpulayer_token\"": func(s *ServerConfig) { s.ProvisionExecPassEnv = []string{"gpulayer_token"} },
		"server.provision_exec_pass_env:":                       func(s *ServerConfig) { s.ProvisionExecPassEnv = make([]string, maxProvisionAllow+1) },
	} {
		d := DefaultConfig()
		d.Merge(&Config{Server: &ServerConfig{Enabled: true}})
		mut(d.Server)
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: Validate = %v", name, err)
		}
	}
	dir := t.TempDir()
	path := dir + "/s.hcl"
	if err := os.WriteFile(path, []byte("server {\n  enabled = true\n  provision_exec_commands = [\"/opt/cloud\"]\n  provision_exec_pass_env = [\"HOME\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LoadConfigFile(path)
	if err != nil || len(f.Server.ProvisionExecCommands) != 1 || f.Server.ProvisionExecCommands[0] != "/opt/cloud" ||
		len(f.Server.ProvisionExecPassEnv) != 1 || f.Server.ProvisionExecPassEnv[0] != "HOME" {
		t.Fatalf("LoadConfigFile = %+v, %v", f, err)
	}
}
