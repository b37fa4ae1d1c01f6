package native

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/gpulayer/gpulayer/agent/driver"
)

// DefaultPath is the PATH a task gets when its environment has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// taskConfig is the native driver's config block: command, args, when
// the agent runs as root the user to run as, and whether the task's CPU is
// capped (cpu_hard_limit, Nomad's name for it).
type taskConfig struct {
	Command string
	Args    []string
	User    string
	// CPUHardLimit caps the task's CPU time at its CPU resource (MHz
	// turned into a share of cores) where cgroups allow, instead of only
	// weighting it against other tasks.
	CPUHardLimit bool
}

// configKeys are the keys a native task's config block may hold.
var configKeys = []string{"command", "args", "user", "cpu_hard_limit"}

// parseConfig reads and checks a task's config map. Every error wraps
// driver.ErrInvalidConfig and names the offending key.
func parseConfig(m map[string]interface{}) (*taskConfig, error) {
	var unknown []string
	for k := range m {
		if !slices.Contains(configKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%w: unknown key %q (the native driver accepts only %q)", driver.ErrInvalidConfig, unknown[0], configKeys)
	}
	var tc taskConfig
	raw, ok := m["command"]
	if !ok {
		return nil, fmt.Errorf("%w: key \"command\" is required", driver.ErrInvalidConfig)
	}
	cmd, ok := raw.(string)
	if !ok || strings.TrimSpace(cmd) == "" {
		return nil, fmt.Errorf("%w: key \"command\" must be a non-empty string, got %v", driver.ErrInvalidConfig, raw)
	}
	tc.Command = cmd
	if raw, ok := m["user"]; ok {
		u, ok := raw.(string)
		if !ok || strings.TrimSpace(u) == "" {
			return nil, fmt.Errorf("%w: key \"user\" must be a non-empty string, got %v", driver.ErrInvalidConfig, raw)
		}
		tc.User = u
	}
	if raw, ok := m["cpu_hard_limit"]; ok {
		b, ok := raw.(bool)
		if !ok {
			return nil, fmt.Errorf("%w: key \"cpu_hard_limit\" must be a bool (true or false), got %T %v", driver.ErrInvalidConfig, raw, raw)
		}
		tc.CPUHardLimit = b
	}
	if raw, ok := m["args"]; ok && raw != nil {
		switch v := raw.(type) {
		case []string:
			tc.Args = append([]string(nil), v...)
		case []interface{}:
			for i, a := range v {
				s, ok := a.(string)
				if !ok {
					return nil, fmt.Errorf("%w: key \"args\": element %d must be a string, got %T", driver.ErrInvalidConfig, i, a)
				}
				tc.Args = append(tc.Args, s)
			}
		default:
			return nil, fmt.Errorf("%w: key \"args\" must be a list of strings, got %T", driver.ErrInvalidConfig, raw)
		}
	}
	return &tc, nil
}

// resolveCommand finds the executable: a path with a slash is taken as is
// (relative to taskDir when relative), a bare name is searched in path.
// It returns an error wrapping driver.ErrInvalidConfig when the command
// does not exist, is a directory or is not executable.
func resolveCommand(command, taskDir, path string) (string, error) {
	check := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return fmt.Errorf("%w: command %q is a directory", driver.ErrInvalidConfig, command)
		}
		if fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%w: command %q is not executable (mode %s)", driver.ErrInvalidConfig, command, fi.Mode().Perm())
		}
		return nil
	}
	if strings.Contains(command, "/") {
		p := command
		if !filepath.IsAbs(p) {
			p = filepath.Join(taskDir, p)
		}
		if err := check(p); err != nil {
			if os.IsNotExist(err) {
				return "", fmt.Errorf("%w: command %q not found", driver.ErrInvalidConfig, command)
			}
			return "", err
		}
		return p, nil
	}
	var firstErr error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, command)
		err := check(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && !os.IsNotExist(err) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", fmt.Errorf("%w: command %q not found in PATH %q", driver.ErrInvalidConfig, command, path)
}

var signals = map[string]syscall.Signal{
	"SIGTERM": syscall.SIGTERM,
	"SIGINT":  syscall.SIGINT,
	"SIGKILL": syscall.SIGKILL,
	"SIGHUP":  syscall.SIGHUP,
	"SIGQUIT": syscall.SIGQUIT,
	"SIGUSR1": syscall.SIGUSR1,
	"SIGUSR2": syscall.SIGUSR2,
}

// parseSignal maps "SIGTERM", "TERM" or "" (SIGTERM) to a signal. Unknown
// names return an error wrapping driver.ErrInvalidConfig.
func parseSignal(name string) (syscall.Signal, error) {
	if name == "" {
		name = driver.DefaultKillSignal
	}
	n := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	s, ok := signals[n]
	if !ok {
		return 0, fmt.Errorf("%w: unknown kill signal %q", driver.ErrInvalidConfig, name)
	}
	return s, nil
}
