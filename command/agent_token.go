package command

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// aclTokenEnv names the environment variable a client-only agent reads
// its node-registration token from when -acl-token is not given. Unlike
// a flag, which every local process (tasks included) reads in
// /proc/<pid>/cmdline, the environment of a process is readable only by
// its own user (/proc/<pid>/environ, mode 0400, and ptrace rights).
const aclTokenEnv = "GPULAYER_ACL_TOKEN"

// maxTokenFileBytes bounds a token file read for -acl-token=@FILE, in
// bytes: a secret is at most 256 bytes (acl.token's bound, checked by the
// config), plus room for whitespace and a newline.
const maxTokenFileBytes = 4096

// resolveACLToken returns the agent's registration token: flagValue, the
// -acl-token value, when set (a literal secret, or "@FILE" for the first
// line of FILE, surrounding whitespace trimmed), else $GPULAYER_ACL_TOKEN,
// else "" (acl { token } of the config file then applies). literal
// reports a secret written on the command line. Errors: an unreadable,
// empty or over 4 KiB token file, each naming -acl-token.
func resolveACLToken(flagValue string) (token string, literal bool, err error) {
	if flagValue == "" {
		return strings.TrimSpace(os.Getenv(aclTokenEnv)), false, nil
	}
	path, isFile := strings.CutPrefix(flagValue, "@")
	if !isFile {
		return flagValue, true, nil
	}
	if path == "" {
		return "", false, fmt.Errorf("-acl-token=@FILE: no file named")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, fmt.Errorf("-acl-token=@%s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", false, fmt.Errorf("-acl-token=@%s: %w", path, err)
	}
	if len(b) > maxTokenFileBytes {
		return "", false, fmt.Errorf("-acl-token=@%s: over %d bytes, want one token secret", path, maxTokenFileBytes)
	}
	token = strings.TrimSpace(string(b))
	if token == "" {
		return "", false, fmt.Errorf("-acl-token=@%s: the file is empty", path)
	}
	if strings.ContainsAny(token, "\r\n") {
		return "", false, fmt.Errorf("-acl-token=@%s: more than one line, want one token secret", path)
	}
	return token, false, nil
}

// tokenOnCommandLineWarning is logged at start when -acl-token carried a
// literal secret outside -dev.
const tokenOnCommandLineWarning = "THE ACL TOKEN IS ON THE COMMAND LINE: every local process, tasks included, can read it in /proc/<pid>/cmdline or ps; " +
	"pass -acl-token=@FILE, set " + aclTokenEnv + " or acl { token } in -config instead (website/docs/acl.md)"
