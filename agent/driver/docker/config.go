package docker

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// taskConfig is the docker driver's config block:
//
//	config {
//	  image    = "registry/app:1.2"          # required
//	  command  = "/app/serve"                # replaces the image's entrypoint
//	  args     = ["--port", "8080"]
//	  work_dir = "/app"                      # absolute path in the container
//	  ports    = ["8080:80", "9000:9000/udp"] # host:container[/proto], host on 127.0.0.1 unless given as ip:host:container
//	  mounts   = [{ source = "data", target = "/data", readonly = true }]
//	  labels   = { team = "ml" }
//	  cap_drop = ["chown"]
//	  # refused unless the client allows them (Allowances):
//	  privileged   = true
//	  cap_add      = ["net_admin"]
//	  network_mode = "host"  # also pid_mode, ipc_mode, userns_mode
//	}
//
// A mount's source is a path inside the allocation directory (relative to
// it, or absolute and inside it); anything else is refused unless the
// client's docker { volumes { enabled = true } } allows host paths.
type taskConfig struct {
	Image   string
	Command string
	Args    []string
	WorkDir string
	Ports   []portMapping
	Mounts  []mountSpec
	Labels  map[string]string

	Privileged  bool
	CapAdd      []string // lower case, without "cap_"
	CapDrop     []string
	NetworkMode string
	PidMode     string
	IpcMode     string
	UsernsMode  string
}

type portMapping struct {
	HostIP        string
	HostPort      int
	ContainerPort int
	Proto         string
}

// mountKeys are the keys of one block of a docker task's "mounts" list.
var mountKeys = []string{"source", "target", "readonly"}

type mountSpec struct {
	// Source is the mount's source: as written after checkConfig, the
	// absolute host path checked to be in the alloc dir after parseConfig.
	Source   string
	Target   string
	ReadOnly bool
	// InAlloc is set by parseConfig for a source inside the allocation
	// directory (every source unless volumes allows a host path): the
	// driver pins it before Docker resolves it (pinMounts).
	InAlloc bool
}

// configKeys are the keys a docker task's config block may hold.
var configKeys = []string{"image", "command", "args", "work_dir", "ports", "mounts", "labels",
	"privileged", "cap_add", "cap_drop", "network_mode", "pid_mode", "ipc_mode", "userns_mode"}

func init() {
	structs.RegisterDriverConfigValidator(Name, ValidateConfig)
}

// ValidateConfig is the docker driver's structs.DriverConfigValidator,
// run by servers when a job is registered or planned. It applies the
// rules StartTask applies on the client, less those that need the
// client's filesystem: every key and its kind, ports, labels, and mounts
// whose relative source climbs out of the allocation directory ("..");
// an absolute source, and symlinks, are checked on the client against the
// allocation directory, which does not exist yet. res is not used: the
// docker driver has no resource-dependent keys. Its errors name the key
// and do not wrap driver.ErrInvalidConfig.
func ValidateConfig(cfg map[string]interface{}, _ *structs.Resources) error {
	_, err := checkConfig(cfg)
	return err
}

// parseConfig reads and checks a task's config map against allocDir and
// the client's allowances, resolving each mount's source inside allocDir
// (or, with allow.Volumes, taking an absolute host path as is). A source
// inside allocDir must exist and lie on a path no task can change
// (stablePath: every directory from allocDir to its parent the agent's,
// not writable by group or others). Every error wraps
// driver.ErrInvalidConfig and names the key (and the mount or port by its
// position and value).
func parseConfig(m map[string]interface{}, allocDir string, allow Allowances) (*taskConfig, error) {
	tc, err := checkConfig(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", driver.ErrInvalidConfig, err)
	}
	if err := allow.check(tc); err != nil {
		return nil, err
	}
	for i := range tc.Mounts {
		src := tc.Mounts[i].Source
		if allow.Volumes && filepath.IsAbs(src) {
			tc.Mounts[i].Source = filepath.Clean(src)
			continue
		}
		abs, err := insideDir(allocDir, src)
		if err != nil {
			return nil, fmt.Errorf("%w: key \"mounts\": mount %q (element %d) is refused: %v (the client's docker { volumes { enabled = true } } setting allows host paths)", driver.ErrInvalidConfig, src, i, err)
		}
		// Docker resolves the path again at start: it must be a path no
		// task can change in between (see stablePath).
		if err := stablePath(resolvedDir(allocDir), abs); err != nil {
			return nil, fmt.Errorf("%w: key \"mounts\": mount %q (element %d) is refused: %v", driver.ErrInvalidConfig, src, i, err)
		}
		tc.Mounts[i].Source, tc.Mounts[i].InAlloc = abs, true
	}
	return tc, nil
}

// checkConfig is parseConfig's pure part, shared by the client
// (StartTask) and the servers (ValidateConfig): mount sources are left as
// written. Its errors name the key and describe a wrong value with
// driver.DescribeValue.
func checkConfig(m map[string]interface{}) (*taskConfig, error) {
	if err := driver.CheckKeys(m, configKeys, "the docker driver"); err != nil {
		return nil, err
	}
	var tc taskConfig
	raw, ok := m["image"]
	if !ok {
		return nil, errors.New(`key "image" is required`)
	}
	img, ok := raw.(string)
	if !ok || strings.TrimSpace(img) == "" {
		return nil, fmt.Errorf(`key "image" must be a non-empty string, got %s`, driver.DescribeValue(raw))
	}
	tc.Image = img
	if raw, ok := m["command"]; ok {
		s, ok := raw.(string)
		if !ok {
			return nil, fmt.Errorf(`key "command" must be a string, got %s`, driver.DescribeValue(raw))
		}
		tc.Command = s
	}
	var err error
	if tc.Args, err = driver.StringList(m, "args"); err != nil {
		return nil, err
	}
	if raw, ok := m["work_dir"]; ok {
		s, ok := raw.(string)
		if !ok || !strings.HasPrefix(s, "/") {
			return nil, fmt.Errorf(`key "work_dir" must be an absolute path in the container, got %s`, driver.DescribeValue(raw))
		}
		tc.WorkDir = s
	}
	ports, err := driver.StringList(m, "ports")
	if err != nil {
		return nil, err
	}
	for i, p := range ports {
		pm, err := parsePort(p)
		if err != nil {
			return nil, fmt.Errorf(`key "ports": element %d %q: %v`, i, p, err)
		}
		tc.Ports = append(tc.Ports, pm)
	}
	if tc.Mounts, err = checkMounts(m["mounts"]); err != nil {
		return nil, err
	}
	if err := checkPrivilegeKeys(m, &tc); err != nil {
		return nil, err
	}
	if raw, ok := m["labels"]; ok && raw != nil {
		lm, ok := raw.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf(`key "labels" must be a map of strings, got %s`, driver.DescribeValue(raw))
		}
		tc.Labels = map[string]string{}
		for k, v := range lm {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf(`key "labels": label %q must be a string, got %s`, k, driver.DescribeValue(v))
			}
			if strings.HasPrefix(k, labelPrefix) {
				return nil, fmt.Errorf(`key "labels": label %q uses the reserved prefix %q`, k, labelPrefix)
			}
			tc.Labels[k] = s
		}
	}
	return &tc, nil
}

// parsePort reads "[ip:]host:container[/proto]" or "container[/proto]"
// (host port = container port).
func parsePort(s string) (portMapping, error) {
	pm := portMapping{HostIP: "127.0.0.1", Proto: "tcp"}
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		pm.Proto = s[i+1:]
		s = s[:i]
		if pm.Proto != "tcp" && pm.Proto != "udp" {
			return pm, fmt.Errorf("protocol must be tcp or udp, got %q", pm.Proto)
		}
	}
	parts := strings.Split(s, ":")
	num := func(p string) (int, error) {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
		}
		return n, nil
	}
	var err error
	switch len(parts) {
	case 1:
		if pm.ContainerPort, err = num(parts[0]); err != nil {
			return pm, err
		}
		pm.HostPort = pm.ContainerPort
	case 2, 3:
		if len(parts) == 3 {
			pm.HostIP = parts[0]
			parts = parts[1:]
		}
		if pm.HostPort, err = num(parts[0]); err != nil {
			return pm, err
		}
		if pm.ContainerPort, err = num(parts[1]); err != nil {
			return pm, err
		}
	default:
		return pm, fmt.Errorf("want [ip:]host:container[/proto]")
	}
	return pm, nil
}

// checkMounts reads the "mounts" list: blocks of source, target and
// readonly. A source must be non-empty and, when relative, must not climb
// out of the allocation directory ("../x"); the target must be an
// absolute path. Sources are returned as written; parseConfig resolves
// them against the allocation directory.
func checkMounts(raw interface{}) ([]mountSpec, error) {
	if raw == nil {
		return nil, nil
	}
	list, ok := raw.([]interface{})
	if !ok {
		if ml, ok2 := raw.([]map[string]interface{}); ok2 {
			for _, m := range ml {
				list = append(list, m)
			}
		} else {
			return nil, fmt.Errorf(`key "mounts" must be a list of {source, target, readonly} blocks, got %s`, driver.DescribeValue(raw))
		}
	}
	var out []mountSpec
	for i, el := range list {
		m, ok := el.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf(`key "mounts": element %d must be a {source, target, readonly} block, got %s`, i, driver.DescribeValue(el))
		}
		if err := driver.CheckKeys(m, mountKeys, "a mount"); err != nil {
			return nil, fmt.Errorf(`key "mounts": element %d: %w`, i, err)
		}
		src, _ := m["source"].(string)
		dst, _ := m["target"].(string)
		if src == "" || !strings.HasPrefix(dst, "/") {
			return nil, fmt.Errorf(`key "mounts": element %d needs a source and an absolute target, got source %s and target %s`, i, driver.DescribeValue(m["source"]), driver.DescribeValue(m["target"]))
		}
		ro := false
		if v, ok := m["readonly"]; ok {
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf(`key "mounts": element %d: readonly must be true or false, got %s`, i, driver.DescribeValue(v))
			}
			ro = b
		}
		if c := filepath.Clean(src); !filepath.IsAbs(c) && (c == ".." || strings.HasPrefix(c, "../")) {
			return nil, fmt.Errorf(`key "mounts": mount %q (element %d) is refused: it climbs out of the allocation directory; only paths inside it can be mounted`, src, i)
		}
		out = append(out, mountSpec{Source: src, Target: dst, ReadOnly: ro})
	}
	return out, nil
}

// insideDir resolves p (relative to dir, or absolute) and checks that it
// is dir or below it, following symlinks of the part that exists.
func insideDir(dir, p string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("no allocation directory to mount from")
	}
	root := resolvedDir(dir)
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(dir, p)
	}
	abs = filepath.Clean(abs)
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	} else if rel, err := filepath.Rel(filepath.Clean(dir), abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		abs = filepath.Join(root, rel)
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("it is outside the allocation directory %s; only paths inside it can be mounted", dir)
	}
	return abs, nil
}

// resolvedDir is dir with its symlinks resolved, or dir cleaned when it
// cannot be resolved.
func resolvedDir(dir string) string {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	return root
}
