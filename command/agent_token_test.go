package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"
)

// TestACLTokenFromEnv: a client agent's registration token need not be on
// its command line, where every local process (tasks included) reads it
// in /proc/<pid>/cmdline: it comes from $GPULAYER_ACL_TOKEN or from a
// file named by -acl-token=@FILE. A literal -acl-token still works outside
// -dev but is flagged for the start-up warning. The flag wins over the
// environment, and both over acl { token } in the config file.
func TestACLTokenFromEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("  from-file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(conf, []byte("acl {\n  token = \"from-config\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"-client", "-servers=10.0.0.1:4656", "-data-dir=" + t.TempDir()}
	cases := []struct {
		name, env   string
		args        []string
		want        string
		wantLiteral bool
	}{
		{"env", "from-env-secret", nil, "from-env-secret", false},
		{"env over the config file", "from-env-secret", []string{"-config=" + conf}, "from-env-secret", false},
		{"config file alone", "", []string{"-config=" + conf}, "from-config", false},
		{"file", "from-env-secret", []string{"-acl-token=@" + file}, "from-file-secret", false},
		{"literal flag warns", "from-env-secret", []string{"-acl-token=literal-secret"}, "literal-secret", true},
		{"literal flag in dev does not warn", "", []string{"-dev", "-acl-token=literal-secret"}, "literal-secret", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(aclTokenEnv, tc.env)
			c := &AgentCommand{Ui: cli.NewMockUi()}
			cfg, err := c.readConfig(append(append([]string{}, base...), tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.ACLToken(); got != tc.want {
				t.Errorf("token %q, want %q", got, tc.want)
			}
			if c.tokenOnCommandLine != tc.wantLiteral {
				t.Errorf("token on the command line = %v, want %v", c.tokenOnCommandLine, tc.wantLiteral)
			}
		})
	}

	empty := filepath.Join(dir, "empty")
	twoLines := filepath.Join(dir, "two")
	big := filepath.Join(dir, "big")
	for p, b := range map[string]string{empty: "\n", twoLines: "a\nb\n", big: strings.Repeat("x", maxTokenFileBytes+1)} {
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []struct{ arg, want string }{
		{"-acl-token=@", "no file named"},
		{"-acl-token=@" + filepath.Join(dir, "missing"), "no such file"},
		{"-acl-token=@" + empty, "empty"},
		{"-acl-token=@" + twoLines, "more than one line"},
		{"-acl-token=@" + big, "over 4096 bytes"},
	} {
		c := &AgentCommand{Ui: cli.NewMockUi()}
		if _, err := c.readConfig(append(append([]string{}, base...), bad.arg)); err == nil || !strings.Contains(err.Error(), "-acl-token") || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error naming -acl-token and %q", bad.arg, err, bad.want)
		}
	}
}
