package structs

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds on what a job may ask for. Each is far above what one node can
// hold today, so no real job meets it, and far below the point where a sum
// over a job's allocations, a MiB-to-bytes conversion (<< 20) or a
// nanosecond duration overflows int64 into a negative number, which the
// Docker API and cgroups read as "no limit". Job.Validate refuses a job past
// any of them with an error naming the field (ErrInvalid, HTTP 400).
const (
	// MaxCPUMHz caps a task's cpu: 16777216 MHz (2^24), 4096 cores at
	// 4 GHz. A 2-socket server with 384 cores at 3.7 GHz is 1.4 M MHz.
	MaxCPUMHz = 1 << 24
	// MaxMemoryMB caps a task's memory and a device's memory share:
	// 64 TiB in MiB (2^26), twice the largest single-host memory sold
	// today (32 TiB). A node with 2 TiB of RAM and 8 GPUs of 141 GiB fits
	// 30 times over. In bytes it is 2^46, so MiB << 20 cannot overflow.
	MaxMemoryMB = 64 << 20
	// MaxDeviceCount caps the instances one device request may ask for:
	// 1024. The densest GPU nodes hold 8 to 16 GPUs, or 7 MIG instances
	// each (112).
	MaxDeviceCount = 1024
	// MaxKillTimeout caps kill_timeout: 24 hours. A task that needs longer
	// than a day to stop is not stopping.
	MaxKillTimeout = 24 * time.Hour
	// MaxPolicyAttempts caps restart and reschedule attempts: 10000.
	MaxPolicyAttempts = 10_000
	// MaxPolicyDelay caps restart and reschedule delay and max_delay: 24
	// hours.
	MaxPolicyDelay = 24 * time.Hour
	// MaxPolicyInterval caps restart and reschedule interval: 30 days.
	MaxPolicyInterval = 30 * 24 * time.Hour
	// MaxNameLength caps names (job ID and Name, group, task, node name
	// and ID, datacenter, namespace, meta key): 128 bytes, as Nomad.
	MaxNameLength = 128
	// MaxMapEntries caps the entries of a meta or env map and the number
	// of datacenters, groups in a job, tasks in a group, and constraints,
	// affinities and device requests at one level: 1024.
	MaxMapEntries = 1024
	// MaxValueLength caps one meta or env value and one constraint
	// target: 64 KiB.
	MaxValueLength = 64 << 10
	// MaxDriverConfigDepth caps the nesting of a task's driver config
	// (maps and lists inside maps): 32 levels.
	MaxDriverConfigDepth = 32
	// MaxDriverConfigElements caps the values (maps, lists and scalars
	// together) in a task's driver config: 10000.
	MaxDriverConfigElements = 10_000
)

// validNamespace is Nomad's namespace name rule: letters, digits and '-',
// 1 to 128 of them.
var validNamespace = regexp.MustCompile(`^[a-zA-Z0-9-]{1,128}$`)

// validDatacenter is a datacenter name or a glob of one (Nomad allows "*"
// and "dc*"): letters, digits, '.', '_', '-' and '*', 1 to 128.
var validDatacenter = regexp.MustCompile(`^[a-zA-Z0-9._*-]{1,128}$`)

// validMetaKey is a meta or env key: it must not be empty, hold no
// whitespace, control character, '=' or NUL, and be at most 128 bytes.
// Nomad interpolates meta keys as ${meta.KEY} and exports them as
// NOMAD_META_KEY environment variables.
func validMetaKey(k string) bool {
	if k == "" || len(k) > MaxNameLength || !utf8.ValidString(k) {
		return false
	}
	for _, r := range k {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '=' {
			return false
		}
	}
	return true
}

// validFreeName is a display name (a job's Name): 1 to 128 bytes of valid
// UTF-8 without control characters (NUL, newlines, escapes), which would
// forge lines in logs and terminals.
func validFreeName(s string) bool {
	if s == "" || len(s) > MaxNameLength || !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

// ValidateNamespace returns nil when ns is a valid namespace name (empty
// means "default"), else an error matching ErrInvalid naming the rule.
func ValidateNamespace(ns string) error {
	if ns != "" && !validNamespace.MatchString(ns) {
		return fmt.Errorf("%w: namespace: must be 1-128 letters, digits or '-', got %q", ErrInvalid, clip(ns))
	}
	return nil
}

// clip shortens s for an error message to at most 64 bytes.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}

// mapProblems returns the problems of a meta or env map named field.
func mapProblems(field string, m map[string]string) []string {
	var p []string
	if len(m) > MaxMapEntries {
		p = append(p, fmt.Sprintf("%s: at most %d entries, got %d", field, MaxMapEntries, len(m)))
		return p
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !validMetaKey(k) {
			p = append(p, fmt.Sprintf("%s: key %q: must be 1-%d bytes without spaces, control characters or '='", field, clip(k), MaxNameLength))
		}
		if len(m[k]) > MaxValueLength {
			p = append(p, fmt.Sprintf("%s: key %q: value of %d bytes, at most %d", field, clip(k), len(m[k]), MaxValueLength))
		}
	}
	return p
}

// envMapProblems is mapProblems for a map whose values reach a task's
// environment (meta as NOMAD_META_*, env): a value may not hold a NUL
// byte, which no environment variable can (the task would fail to start
// with "environment variable contains NUL").
func envMapProblems(field string, m map[string]string) []string {
	p := mapProblems(field, m)
	if len(m) > MaxMapEntries {
		return p
	}
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if strings.ContainsRune(v, 0) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		p = append(p, fmt.Sprintf("%s: key %q: value contains a NUL byte, which an environment variable cannot hold", field, clip(k)))
	}
	return p
}

// fieldProblems returns the problems of a job's own names, maps and
// lists (its groups are checked by TaskGroup.validate).
func (j *Job) fieldProblems() []string {
	var p []string
	if j.Name != "" && !validFreeName(j.Name) {
		p = append(p, fmt.Sprintf("name: must be 1-%d bytes without control characters, got %q", MaxNameLength, clip(j.Name)))
	}
	if err := ValidateNamespace(j.Namespace); err != nil {
		p = append(p, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
	}
	if len(j.Datacenters) > MaxMapEntries {
		p = append(p, fmt.Sprintf("datacenters: at most %d, got %d", MaxMapEntries, len(j.Datacenters)))
	} else {
		for _, dc := range j.Datacenters {
			if !validDatacenter.MatchString(dc) {
				p = append(p, fmt.Sprintf("datacenters: %q: must be 1-128 letters, digits, '.', '_', '-' or '*'", clip(dc)))
			}
		}
	}
	p = append(p, envMapProblems("meta", j.Meta)...)
	p = append(p, listProblems("", len(j.Constraints), len(j.Affinities))...)
	if len(j.TaskGroups) > MaxMapEntries {
		p = append(p, fmt.Sprintf("group: at most %d groups, got %d", MaxMapEntries, len(j.TaskGroups)))
	}
	for _, tg := range j.TaskGroups {
		if tg != nil && len(tg.Tasks) > MaxMapEntries {
			p = append(p, fmt.Sprintf("group %q: task: at most %d tasks, got %d", clip(tg.Name), MaxMapEntries, len(tg.Tasks)))
		}
	}
	return p
}

// listProblems returns the problems of too many constraints or affinities
// at one level; where prefixes each message.
func listProblems(where string, constraints, affinities int) []string {
	var p []string
	if constraints > MaxMapEntries {
		p = append(p, fmt.Sprintf("%sconstraint: at most %d, got %d", where, MaxMapEntries, constraints))
	}
	if affinities > MaxMapEntries {
		p = append(p, fmt.Sprintf("%saffinity: at most %d, got %d", where, MaxMapEntries, affinities))
	}
	return p
}

// restartProblems returns the problems of a restart policy's bounds.
func restartProblems(rp *RestartPolicy) []string {
	var p []string
	if rp.Attempts > MaxPolicyAttempts {
		p = append(p, fmt.Sprintf("restart: attempts: at most %d, got %d", MaxPolicyAttempts, rp.Attempts))
	}
	if rp.Delay > MaxPolicyDelay {
		p = append(p, fmt.Sprintf("restart: delay: at most %s, got %s", MaxPolicyDelay, rp.Delay))
	}
	if rp.Interval > MaxPolicyInterval {
		p = append(p, fmt.Sprintf("restart: interval: at most %s, got %s", MaxPolicyInterval, rp.Interval))
	}
	return p
}

// rescheduleBoundProblems returns the problems of a reschedule policy's
// bounds.
func rescheduleBoundProblems(rp *ReschedulePolicy) []string {
	if rp == nil {
		return nil
	}
	var p []string
	if rp.Attempts > MaxPolicyAttempts {
		p = append(p, fmt.Sprintf("reschedule: attempts: at most %d, got %d", MaxPolicyAttempts, rp.Attempts))
	}
	if rp.Delay > MaxPolicyDelay {
		p = append(p, fmt.Sprintf("reschedule: delay: at most %s, got %s", MaxPolicyDelay, rp.Delay))
	}
	if rp.MaxDelay > MaxPolicyDelay {
		p = append(p, fmt.Sprintf("reschedule: max_delay: at most %s, got %s", MaxPolicyDelay, rp.MaxDelay))
	}
	if rp.Interval > MaxPolicyInterval {
		p = append(p, fmt.Sprintf("reschedule: interval: at most %s, got %s", MaxPolicyInterval, rp.Interval))
	}
	return p
}

// taskBoundProblems returns the problems of a task's numbers, maps and
// driver config size; the caller prefixes them with the task.
func taskBoundProblems(t *Task) []string {
	var p []string
	if t.KillTimeout > MaxKillTimeout {
		p = append(p, fmt.Sprintf("kill_timeout: at most %s, got %s", MaxKillTimeout, t.KillTimeout))
	}
	if r := t.Resources; r != nil {
		if r.CPU > MaxCPUMHz {
			p = append(p, fmt.Sprintf("resources: cpu: at most %d MHz, got %d", MaxCPUMHz, r.CPU))
		}
		if r.MemoryMB > MaxMemoryMB {
			p = append(p, fmt.Sprintf("resources: memory: at most %d MiB (64 TiB), got %d", MaxMemoryMB, r.MemoryMB))
		}
		if len(r.Devices) > MaxMapEntries {
			p = append(p, fmt.Sprintf("resources: device: at most %d requests, got %d", MaxMapEntries, len(r.Devices)))
		}
		for _, d := range r.Devices {
			if d == nil {
				continue
			}
			if d.Count > MaxDeviceCount {
				p = append(p, fmt.Sprintf("resources: device %q: count: at most %d, got %d", clip(d.Name), MaxDeviceCount, d.Count))
			}
			if d.MemoryMB > MaxMemoryMB {
				p = append(p, fmt.Sprintf("resources: device %q: memory: at most %d MiB, got %d", clip(d.Name), MaxMemoryMB, d.MemoryMB))
			}
			p = append(p, listProblems(fmt.Sprintf("resources: device %q: ", clip(d.Name)), len(d.Constraints), len(d.Affinities))...)
		}
	}
	p = append(p, envMapProblems("meta", t.Meta)...)
	p = append(p, envMapProblems("env", t.Env)...)
	p = append(p, listProblems("", len(t.Constraints), len(t.Affinities))...)
	if msg := driverConfigSizeProblem(t.Config); msg != "" {
		p = append(p, "config: "+msg)
	}
	return p
}

// driverConfigSizeProblem returns why cfg is too deep or too large, or "".
// It walks iteratively, so any depth is safe to measure.
func driverConfigSizeProblem(cfg map[string]interface{}) string {
	type item struct {
		v     interface{}
		depth int
		path  string
	}
	stack := []item{{v: cfg, depth: 1}}
	elements := 0
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		elements++
		if elements > MaxDriverConfigElements {
			return fmt.Sprintf("more than %d values", MaxDriverConfigElements)
		}
		switch v := it.v.(type) {
		case map[string]interface{}:
			if it.depth > MaxDriverConfigDepth {
				return fmt.Sprintf("key %q: nested deeper than %d levels", it.path, MaxDriverConfigDepth)
			}
			for k, e := range v {
				stack = append(stack, item{v: e, depth: it.depth + 1, path: joinPath(it.path, k)})
			}
		case []interface{}:
			if it.depth > MaxDriverConfigDepth {
				return fmt.Sprintf("key %q: nested deeper than %d levels", it.path, MaxDriverConfigDepth)
			}
			for i, e := range v {
				stack = append(stack, item{v: e, depth: it.depth + 1, path: fmt.Sprintf("%s[%d]", it.path, i)})
			}
		case []map[string]interface{}:
			if it.depth > MaxDriverConfigDepth {
				return fmt.Sprintf("key %q: nested deeper than %d levels", it.path, MaxDriverConfigDepth)
			}
			for i, e := range v {
				stack = append(stack, item{v: e, depth: it.depth + 1, path: fmt.Sprintf("%s[%d]", it.path, i)})
			}
		case string:
			if len(v) > MaxValueLength*16 {
				return fmt.Sprintf("key %q: a string of %d bytes, at most %d", it.path, len(v), MaxValueLength*16)
			}
		}
	}
	return ""
}

func joinPath(parent, key string) string {
	key = clip(key)
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// ValidateNodeFields checks the fields of a node a client registers: ID,
// Name, Datacenter and NodeClass names (1-128 letters, digits, '.', '_',
// '-'; class may be empty), Attributes and Meta maps (keys as meta keys,
// at most MaxMapEntries entries each, values at most MaxValueLength). It
// returns an error matching ErrInvalid naming every bad field, or nil.
func (n *Node) ValidateNodeFields() error {
	var p []string
	if !validName.MatchString(n.ID) {
		p = append(p, fmt.Sprintf("ID: must be 1-128 letters, digits, '.', '_' or '-' starting with a letter or digit, got %q", clip(n.ID)))
	}
	if !validName.MatchString(n.Name) {
		p = append(p, fmt.Sprintf("Name: must be 1-128 letters, digits, '.', '_' or '-' starting with a letter or digit, got %q", clip(n.Name)))
	}
	if n.Datacenter != "" && !validName.MatchString(n.Datacenter) {
		p = append(p, fmt.Sprintf("Datacenter: must be 1-128 letters, digits, '.', '_' or '-', got %q", clip(n.Datacenter)))
	}
	if n.NodeClass != "" && !validName.MatchString(n.NodeClass) {
		p = append(p, fmt.Sprintf("NodeClass: must be 1-128 letters, digits, '.', '_' or '-', got %q", clip(n.NodeClass)))
	}
	if err := ValidateNodeHTTPAddr(n.HTTPAddr); err != nil {
		p = append(p, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
	}
	p = append(p, mapProblems("Attributes", n.Attributes)...)
	p = append(p, mapProblems("Meta", n.Meta)...)
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%w: node: %s", ErrInvalid, strings.Join(p, "; "))
}
