package agent

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/gpulayer/gpulayer/agent/driver/docker"
	"github.com/gpulayer/gpulayer/agent/driver/native"
)

// NativeConfig is the client's native { ... } block: which users native
// tasks run as when the agent runs as root.
//
//	client {
//	  native {
//	    default_user  = "nobody"        # a task that names no user
//	    allowed_users = ["ml", "render"] # users a task's `user` may name
//	  }
//	}
type NativeConfig struct {
	// DefaultUser is the user of a task that names none. Default
	// "nobody".
	DefaultUser string `hcl:"default_user,optional"`
	// AllowedUsers lists the users a task may name besides DefaultUser.
	// Default none. "root" gives tasks the agent's full privileges.
	AllowedUsers []string `hcl:"allowed_users,optional"`
}

// DockerConfig is the client's docker { ... } block: what docker tasks may
// ask of the host beyond a plain container, with the key names of Nomad's
// docker plugin config. Every setting defaults to false (refused).
//
//	client {
//	  docker {
//	    allow_privileged   = false
//	    allow_caps         = ["net_admin"] # default: Docker's set less net_raw and mknod
//	    allow_host_network = false
//	    allow_host_pid     = false
//	    allow_host_ipc     = false
//	    allow_host_userns  = false
//	    volumes { enabled = false }        # mounts from outside the alloc dir
//	  }
//	}
type DockerConfig struct {
	AllowPrivileged  bool                 `hcl:"allow_privileged,optional"`
	AllowCaps        []string             `hcl:"allow_caps,optional"`
	AllowHostNetwork bool                 `hcl:"allow_host_network,optional"`
	AllowHostPID     bool                 `hcl:"allow_host_pid,optional"`
	AllowHostIPC     bool                 `hcl:"allow_host_ipc,optional"`
	AllowHostUserns  bool                 `hcl:"allow_host_userns,optional"`
	Volumes          *DockerVolumesConfig `hcl:"volumes,block"`
}

// DockerVolumesConfig is docker { volumes { enabled } }: whether a task's
// mounts may name host paths outside its allocation directory.
type DockerVolumesConfig struct {
	Enabled bool `hcl:"enabled,optional"`
}

// userNameRE is what a user name in the config may look like (POSIX
// portable names, as useradd accepts them).
var userNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$`)

// capNameRE is a capability name, with or without "cap_".
var capNameRE = regexp.MustCompile(`^[A-Za-z_]{1,40}$`)

// validateTasks checks the native and docker blocks and names the bad
// field.
func (cl *ClientConfig) validateTasks() []string {
	var p []string
	if n := cl.Native; n != nil {
		if n.DefaultUser != "" && !userNameRE.MatchString(n.DefaultUser) {
			p = append(p, fmt.Sprintf("client.native.default_user: %q is not a user name", n.DefaultUser))
		}
		if len(n.AllowedUsers) > 256 {
			p = append(p, fmt.Sprintf("client.native.allowed_users: at most 256 users, got %d", len(n.AllowedUsers)))
		}
		for i, u := range n.AllowedUsers {
			if !userNameRE.MatchString(u) {
				p = append(p, fmt.Sprintf("client.native.allowed_users[%d]: %q is not a user name", i, u))
			}
		}
	}
	if d := cl.Docker; d != nil {
		if len(d.AllowCaps) > 64 {
			p = append(p, fmt.Sprintf("client.docker.allow_caps: at most 64 capabilities, got %d", len(d.AllowCaps)))
		}
		for i, c := range d.AllowCaps {
			if !capNameRE.MatchString(c) {
				p = append(p, fmt.Sprintf("client.docker.allow_caps[%d]: %q is not a capability name such as \"net_admin\" or \"all\"", i, c))
			}
		}
	}
	return p
}

// nativeUsers is the native driver's user policy from the config.
func (cl *ClientConfig) nativeUsers() native.UserPolicy {
	if cl.Native == nil {
		return native.UserPolicy{}
	}
	return native.UserPolicy{DefaultUser: cl.Native.DefaultUser, AllowedUsers: append([]string(nil), cl.Native.AllowedUsers...)}
}

// dockerAllowances is the docker driver's allowances from the config.
func (cl *ClientConfig) dockerAllowances() docker.Allowances {
	d := cl.Docker
	if d == nil {
		return docker.Allowances{}
	}
	a := docker.Allowances{
		Privileged:  d.AllowPrivileged,
		HostNetwork: d.AllowHostNetwork,
		HostPID:     d.AllowHostPID,
		HostIPC:     d.AllowHostIPC,
		HostUserns:  d.AllowHostUserns,
		Volumes:     d.Volumes != nil && d.Volumes.Enabled,
	}
	for _, c := range d.AllowCaps {
		a.Caps = append(a.Caps, strings.ToLower(c))
	}
	return a
}

// openForTaskUsers lets the users native tasks run as (when the agent
// runs as root, "nobody" by default) pass through the data directory to
// their task directories: mode 0711, search but no listing; what lies in
// it keeps its own mode (server/ stays 0700). Directories above the data
// directory are the operator's: a task whose user cannot pass one fails
// with an event naming it (see the client's startup warning).
func openForTaskUsers(cfg *Config) error {
	if os.Geteuid() != 0 || cfg.Client == nil || !cfg.Client.Enabled {
		return nil
	}
	// Through the descriptor (fstat, fchmod): what is checked is what
	// changes. The data directory is the operator's path, so a symlink
	// to it is followed.
	f, err := os.Open(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("%w: data_dir: %v", ErrConfig, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: data_dir: %v", ErrConfig, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: data_dir: %s is not a directory", ErrConfig, cfg.DataDir)
	}
	if fi.Mode().Perm()&0o001 != 0 {
		return nil
	}
	if err := f.Chmod(fi.Mode().Perm() | 0o011); err != nil {
		return fmt.Errorf("%w: data_dir: let task users pass through %s: %v", ErrConfig, cfg.DataDir, err)
	}
	return nil
}
