package agent

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Bounds on the server's provider allow-lists.
const (
	maxProvisionAllow    = 64
	maxProvisionAllowLen = 4096
)

var (
	provisionImageRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:@-]{0,254}$`)
	provisionEnvNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// mergeProvisionAllow takes o's provider allow-lists where o sets them (a
// later file replaces a list, as with retry_join).
func (s *ServerConfig) mergeProvisionAllow(o *ServerConfig) {
	if len(o.ProvisionExecCommands) > 0 {
		s.ProvisionExecCommands = append([]string(nil), o.ProvisionExecCommands...)
	}
	if len(o.ProvisionDockerImages) > 0 {
		s.ProvisionDockerImages = append([]string(nil), o.ProvisionDockerImages...)
	}
	if len(o.ProvisionDockerBinaries) > 0 {
		s.ProvisionDockerBinaries = append([]string(nil), o.ProvisionDockerBinaries...)
	}
	if len(o.ProvisionExecPassEnv) > 0 {
		s.ProvisionExecPassEnv = append([]string(nil), o.ProvisionExecPassEnv...)
	}
}

// validateProvisionAllow checks the allow-lists: at most
// maxProvisionAllow entries each, programs and binaries clean absolute
// paths, images image references, pass_env names environment variable
// names other than the server's own GPULAYER_ and NOMAD_ ones.
func (s *ServerConfig) validateProvisionAllow() []string {
	var p []string
	paths := func(name string, list []string) {
		if len(list) > maxProvisionAllow {
			p = append(p, fmt.Sprintf("server.%s: at most %d entries, got %d", name, maxProvisionAllow, len(list)))
			return
		}
		for i, v := range list {
			if len(v) > maxProvisionAllowLen || !filepath.IsAbs(v) || filepath.Clean(v) != v {
				p = append(p, fmt.Sprintf("server.%s[%d]: %.128q must be a clean absolute path", name, i, v))
			}
		}
	}
	paths("provision_exec_commands", s.ProvisionExecCommands)
	paths("provision_docker_binaries", s.ProvisionDockerBinaries)
	if n := len(s.ProvisionDockerImages); n > maxProvisionAllow {
		p = append(p, fmt.Sprintf("server.provision_docker_images: at most %d entries, got %d", maxProvisionAllow, n))
	} else {
		for i, v := range s.ProvisionDockerImages {
			if !provisionImageRE.MatchString(v) {
				p = append(p, fmt.Sprintf("server.provision_docker_images[%d]: %.128q is not an image reference", i, v))
			}
		}
	}
	if n := len(s.ProvisionExecPassEnv); n > maxProvisionAllow {
		p = append(p, fmt.Sprintf("server.provision_exec_pass_env: at most %d entries, got %d", maxProvisionAllow, n))
	} else {
		for i, v := range s.ProvisionExecPassEnv {
			u := strings.ToUpper(v)
			switch {
			case !provisionEnvNameRE.MatchString(v):
				p = append(p, fmt.Sprintf("server.provision_exec_pass_env[%d]: %.128q is not an environment variable name", i, v))
			case strings.HasPrefix(u, "GPULAYER_") || strings.HasPrefix(u, "NOMAD_"):
				p = append(p, fmt.Sprintf("server.provision_exec_pass_env[%d]: %q: GPULAYER_ and NOMAD_ variables are the server's and are never passed", i, v))
			}
		}
	}
	return p
}
