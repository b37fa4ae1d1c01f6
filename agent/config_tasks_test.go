package agent

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/agent/driver/docker"
	"github.com/gpulayer/gpulayer/agent/driver/native"
)

func TestConfigTaskAllowances(t *testing.T) {
	cases := []struct {
		name       string
		src        string
		wantUsers  native.UserPolicy
		wantDocker docker.Allowances
		wantErr    string
	}{
		{name: "unset allows nothing", src: `client { enabled = true }`},
		{
			name: "every setting",
			src: `client {
  native {
    default_user  = "ml"
    allowed_users = ["render", "root"]
  }
  docker {
    allow_privileged   = true
    allow_caps         = ["NET_ADMIN", "sys_ptrace"]
    allow_host_network = true
    allow_host_pid     = true
    allow_host_ipc     = true
    allow_host_userns  = true
    volumes { enabled = true }
  }
}`,
			wantUsers:  native.UserPolicy{DefaultUser: "ml", AllowedUsers: []string{"render", "root"}},
			wantDocker: docker.Allowances{Privileged: true, Caps: []string{"net_admin", "sys_ptrace"}, HostNetwork: true, HostPID: true, HostIPC: true, HostUserns: true, Volumes: true},
		},
		{name: "bad default user", src: "client {\n native {\n default_user = \"a b\"\n }\n}", wantErr: `client.native.default_user: "a b" is not a user name`},
		{name: "bad allowed user", src: "client {\n native {\n allowed_users = [\"ok\", \"x:y\"]\n }\n}", wantErr: `client.native.allowed_users[1]: "x:y" is not a user name`},
		{name: "bad capability", src: "client {\n docker {\n allow_caps = [\"net admin\"]\n }\n}", wantErr: `client.docker.allow_caps[0]: "net admin" is not a capability name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fileCfg, err := ParseConfig("agent.hcl", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.Server.Enabled = true
			cfg.Client.Enabled = true
			cfg.Merge(fileCfg)
			err = cfg.Validate()
			if tc.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Client.nativeUsers(); !reflect.DeepEqual(got, tc.wantUsers) {
				t.Fatalf("native users %+v, want %+v", got, tc.wantUsers)
			}
			if got := cfg.Client.dockerAllowances(); !reflect.DeepEqual(got, tc.wantDocker) {
				t.Fatalf("docker allowances %+v, want %+v", got, tc.wantDocker)
			}
		})
	}
}
