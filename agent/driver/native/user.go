package native

import (
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpulayer/gpulayer/agent/driver"
)

// DefaultTaskUser is the user a native task runs as when the agent runs as
// root and neither the task nor the client's config names another: the
// unprivileged "nobody", as Nomad's exec driver does.
const DefaultTaskUser = "nobody"

// UserPolicy says which users native tasks may run as. It matters only
// when the agent runs as root: an agent running as another user runs every
// task as itself, and refuses a task that names another user.
//
// The agent config's client { native { default_user, allowed_users } }
// block fills it.
type UserPolicy struct {
	// DefaultUser is the user a task that names none runs as. Empty means
	// DefaultTaskUser ("nobody").
	DefaultUser string
	// AllowedUsers lists the users a task's user (the task's `user`, or
	// its config's "user" key) may name, besides DefaultUser. Empty
	// allows only DefaultUser. "root" runs a task with the agent's full
	// privileges: list it only on a client whose every job is trusted.
	AllowedUsers []string
}

// defaultUser returns the policy's default user.
func (p UserPolicy) defaultUser() string {
	if p.DefaultUser == "" {
		return DefaultTaskUser
	}
	return p.DefaultUser
}

// allows reports whether a task may name user.
func (p UserPolicy) allows(name string) bool {
	return name == p.defaultUser() || slices.Contains(p.AllowedUsers, name)
}

// allowedList names the users a task may ask for, for error messages.
func (p UserPolicy) allowedList() string {
	l := []string{p.defaultUser()}
	for _, u := range p.AllowedUsers {
		if !slices.Contains(l, u) {
			l = append(l, u)
		}
	}
	return strings.Join(l, ", ")
}

// taskUser returns the user a task asks for: the task's own user field
// (cfg.User) or its config's "user" key; both set and different is an
// error wrapping driver.ErrInvalidConfig.
func taskUser(cfg *driver.TaskConfig, tc *taskConfig) (string, error) {
	if cfg.User != "" && tc.User != "" && cfg.User != tc.User {
		return "", fmt.Errorf("%w: the task's user %q and its config's key \"user\" %q differ: set one", driver.ErrInvalidConfig, cfg.User, tc.User)
	}
	if cfg.User != "" {
		return cfg.User, nil
	}
	return tc.User, nil
}

// credentialFor returns the credential to run a task that asks for user
// name ("" for none) as, under policy p, or nil to run it as the agent's
// own user. With the agent running as root, a task without a user runs as
// the policy's default user, and a task naming a user the policy does not
// allow is refused. With the agent running as another user, the task runs
// as that user, and naming any other user is refused. Errors wrap
// driver.ErrInvalidConfig and name the user.
func credentialFor(p UserPolicy, name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		if name == "" {
			return nil, nil
		}
		u, err := lookupUser(name)
		if err != nil {
			return nil, err
		}
		if int(u.Uid) == os.Geteuid() {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: user %q: running a task as another user needs the agent to run as root (this agent runs as uid %d)", driver.ErrInvalidConfig, name, os.Geteuid())
	}
	if name == "" {
		name = p.defaultUser()
	} else if !p.allows(name) {
		return nil, fmt.Errorf("%w: user %q is not allowed on this client: tasks may run as %s (the client's native { allowed_users } setting)", driver.ErrInvalidConfig, name, p.allowedList())
	}
	return lookupUser(name)
}

// lookupUser returns the credential of the named user: its uid, its
// primary gid and its supplementary groups (os/user). A uid of 0 (root,
// when the policy allows it) gives the same credential: the task is then
// as privileged as the agent. Errors wrap driver.ErrInvalidConfig.
func lookupUser(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%w: user %q: %v", driver.ErrInvalidConfig, name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: user %q has a non-numeric uid %q or gid %q", driver.ErrInvalidConfig, name, u.Uid, u.Gid)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	// Supplementary groups: the user's own, never the agent's (an empty
	// list clears them at setgroups).
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.ParseUint(s, 10, 32); err == nil && uint32(g) != cred.Gid {
				cred.Groups = append(cred.Groups, uint32(g))
			}
		}
	}
	return cred, nil
}
