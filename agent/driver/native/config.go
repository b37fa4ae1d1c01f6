package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
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

func init() {
	structs.RegisterDriverConfigValidator(Name, ValidateConfig)
}

// ValidateConfig is the native driver's structs.DriverConfigValidator,
// run by servers when a job is registered or planned. It applies the
// rules StartTask applies on the client, less those that need the
// client's filesystem (whether the command exists and is executable, and
// whether the user exists): the keys, their kinds, and that
// cpu_hard_limit = true comes with a CPU resource above 0 MHz. Its errors
// name the key and do not wrap driver.ErrInvalidConfig.
func ValidateConfig(cfg map[string]interface{}, res *structs.Resources) error {
	tc, err := checkConfig(cfg)
	if err != nil {
		return err
	}
	var cpu int64
	if res != nil {
		cpu = int64(res.CPU)
	}
	return checkHardLimit(tc, cpu)
}

// parseConfig reads and checks a task's config map. Every error wraps
// driver.ErrInvalidConfig and names the offending key.
func parseConfig(m map[string]interface{}) (*taskConfig, error) {
	tc, err := checkConfig(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", driver.ErrInvalidConfig, err)
	}
	return tc, nil
}

// checkConfig is parseConfig without the wrapping: the pure part, shared
// by the client (StartTask) and the servers (ValidateConfig). Its errors
// name the key and describe a wrong value with driver.DescribeValue.
func checkConfig(m map[string]interface{}) (*taskConfig, error) {
	if err := driver.CheckKeys(m, configKeys, "the native driver"); err != nil {
		return nil, err
	}
	var tc taskConfig
	raw, ok := m["command"]
	if !ok {
		return nil, errors.New(`key "command" is required`)
	}
	cmd, ok := raw.(string)
	if !ok || strings.TrimSpace(cmd) == "" {
		return nil, fmt.Errorf(`key "command" must be a non-empty string, got %s`, driver.DescribeValue(raw))
	}
	tc.Command = cmd
	if raw, ok := m["user"]; ok {
		u, ok := raw.(string)
		if !ok || strings.TrimSpace(u) == "" {
			return nil, fmt.Errorf(`key "user" must be a non-empty string, got %s`, driver.DescribeValue(raw))
		}
		tc.User = u
	}
	if raw, ok := m["cpu_hard_limit"]; ok {
		b, ok := raw.(bool)
		if !ok {
			return nil, fmt.Errorf(`key "cpu_hard_limit" must be true or false, got %s`, driver.DescribeValue(raw))
		}
		tc.CPUHardLimit = b
	}
	args, err := driver.StringList(m, "args")
	if err != nil {
		return nil, err
	}
	tc.Args = args
	return &tc, nil
}

// checkHardLimit refuses cpu_hard_limit = true for a task whose CPU
// resource, cpuMHz, is 0 or less: the cap is a share of that figure.
func checkHardLimit(tc *taskConfig, cpuMHz int64) error {
	if tc.CPUHardLimit && cpuMHz <= 0 {
		return fmt.Errorf(`key "cpu_hard_limit" is true but the task's resources set no cpu (got %d MHz): the hard limit caps the task at its cpu, so set resources { cpu = <MHz> } or remove cpu_hard_limit`, cpuMHz)
	}
	return nil
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
