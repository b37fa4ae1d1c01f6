package docker

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/agent/driver"
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
//	}
//
// A mount's source is a path inside the allocation directory (relative to
// it, or absolute and inside it); anything else is refused.
type taskConfig struct {
	Image   string
	Command string
	Args    []string
	WorkDir string
	Ports   []portMapping
	Mounts  []mountSpec
	Labels  map[string]string
}

type portMapping struct {
	HostIP        string
	HostPort      int
	ContainerPort int
	Proto         string
}

type mountSpec struct {
	// Source is the absolute host path, checked to be in the alloc dir.
	Source   string
	Target   string
	ReadOnly bool
}

var knownKeys = map[string]bool{"image": true, "command": true, "args": true, "work_dir": true, "ports": true, "mounts": true, "labels": true}

// parseConfig reads and checks a task's config map against allocDir.
// Every error wraps driver.ErrInvalidConfig and names the key (and the
// mount or port by its position and value).
func parseConfig(m map[string]interface{}, allocDir string) (*taskConfig, error) {
	var unknown []string
	for k := range m {
		if !knownKeys[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%w: unknown key %q (the docker driver accepts image, command, args, work_dir, ports, mounts and labels)", driver.ErrInvalidConfig, unknown[0])
	}
	var tc taskConfig
	img, ok := m["image"].(string)
	if !ok || strings.TrimSpace(img) == "" {
		return nil, fmt.Errorf("%w: key \"image\" is required and must be a non-empty string, got %v", driver.ErrInvalidConfig, m["image"])
	}
	tc.Image = img
	if raw, ok := m["command"]; ok {
		s, ok := raw.(string)
		if !ok {
			return nil, fmt.Errorf("%w: key \"command\" must be a string, got %T", driver.ErrInvalidConfig, raw)
		}
		tc.Command = s
	}
	var err error
	if tc.Args, err = stringList(m, "args"); err != nil {
		return nil, err
	}
	if raw, ok := m["work_dir"]; ok {
		s, ok := raw.(string)
		if !ok || !strings.HasPrefix(s, "/") {
			return nil, fmt.Errorf("%w: key \"work_dir\" must be an absolute path in the container, got %v", driver.ErrInvalidConfig, raw)
		}
		tc.WorkDir = s
	}
	ports, err := stringList(m, "ports")
	if err != nil {
		return nil, err
	}
	for i, p := range ports {
		pm, err := parsePort(p)
		if err != nil {
			return nil, fmt.Errorf("%w: key \"ports\": element %d %q: %v", driver.ErrInvalidConfig, i, p, err)
		}
		tc.Ports = append(tc.Ports, pm)
	}
	if tc.Mounts, err = parseMounts(m["mounts"], allocDir); err != nil {
		return nil, err
	}
	if raw, ok := m["labels"]; ok && raw != nil {
		lm, ok := raw.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("%w: key \"labels\" must be a map of strings, got %T", driver.ErrInvalidConfig, raw)
		}
		tc.Labels = map[string]string{}
		for k, v := range lm {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%w: key \"labels\": label %q must be a string, got %T", driver.ErrInvalidConfig, k, v)
			}
			if strings.HasPrefix(k, labelPrefix) {
				return nil, fmt.Errorf("%w: key \"labels\": label %q uses the reserved prefix %q", driver.ErrInvalidConfig, k, labelPrefix)
			}
			tc.Labels[k] = s
		}
	}
	return &tc, nil
}

func stringList(m map[string]interface{}, key string) ([]string, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return nil, nil
	}
	switch v := raw.(type) {
	case []string:
		return append([]string(nil), v...), nil
	case []interface{}:
		out := make([]string, 0, len(v))
		for i, a := range v {
			s, ok := a.(string)
			if !ok {
				return nil, fmt.Errorf("%w: key %q: element %d must be a string, got %T", driver.ErrInvalidConfig, key, i, a)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: key %q must be a list of strings, got %T", driver.ErrInvalidConfig, key, raw)
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

// parseMounts reads the "mounts" list. Each source must resolve (after
// cleaning, and following symlinks where it exists) to a path inside
// allocDir.
func parseMounts(raw interface{}, allocDir string) ([]mountSpec, error) {
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
			return nil, fmt.Errorf("%w: key \"mounts\" must be a list of {source, target, readonly} blocks, got %T", driver.ErrInvalidConfig, raw)
		}
	}
	var out []mountSpec
	for i, el := range list {
		m, ok := el.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("%w: key \"mounts\": element %d must be a {source, target, readonly} block, got %T", driver.ErrInvalidConfig, i, el)
		}
		for k := range m {
			if k != "source" && k != "target" && k != "readonly" {
				return nil, fmt.Errorf("%w: key \"mounts\": element %d: unknown key %q", driver.ErrInvalidConfig, i, k)
			}
		}
		src, _ := m["source"].(string)
		dst, _ := m["target"].(string)
		if src == "" || !strings.HasPrefix(dst, "/") {
			return nil, fmt.Errorf("%w: key \"mounts\": element %d needs a source and an absolute target, got source %v target %v", driver.ErrInvalidConfig, i, m["source"], m["target"])
		}
		ro := false
		if v, ok := m["readonly"]; ok {
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("%w: key \"mounts\": element %d: readonly must be a bool, got %T", driver.ErrInvalidConfig, i, v)
			}
			ro = b
		}
		abs, err := insideDir(allocDir, src)
		if err != nil {
			return nil, fmt.Errorf("%w: key \"mounts\": mount %q (element %d) is refused: %v", driver.ErrInvalidConfig, src, i, err)
		}
		out = append(out, mountSpec{Source: abs, Target: dst, ReadOnly: ro})
	}
	return out, nil
}

// insideDir resolves p (relative to dir, or absolute) and checks that it
// is dir or below it, following symlinks of the part that exists.
func insideDir(dir, p string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("no allocation directory to mount from")
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		root = filepath.Clean(dir)
	}
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
