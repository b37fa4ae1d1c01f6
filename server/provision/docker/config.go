package docker

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrConfig is wrapped by every error about the provider's config; the
// error names the key.
var ErrConfig = errors.New("docker provider config")

// Config keys of a pool's ProviderConfig (all optional).
const (
	// KeyImage names an image present on the engine to run instead of
	// the one built from the gpulayer binary. It must hold the binary at
	// AgentPath ("/gpulayer"); nothing is pulled.
	KeyImage = "image"
	// KeyBinary is the absolute path of the gpulayer binary the image is
	// built from (static, or dynamically linked: its interpreter and
	// libraries are copied in). Default: the running executable.
	KeyBinary = "binary"
	// KeyMemoryMB bounds each container's memory, in MiB (default 1024,
	// 64 to 1048576).
	KeyMemoryMB = "memory_mb"
	// KeyPids bounds each container's processes (default 1024, 16 to
	// 65536).
	KeyPids = "pids"
	// KeyCPUs bounds each container's CPU time, in CPUs ("0.5"; default
	// 1, 0.01 to 1024).
	KeyCPUs = "cpus"
	// KeyHTTPPorts are the host ports the containers' agents may listen
	// on, "14700-14799" or "14700,14702"; each container takes the lowest
	// free one (default DefaultHTTPPorts, at most 4096 ports).
	KeyHTTPPorts = "http_ports"
	// KeyLogLevel is the agents' log_level (default INFO).
	KeyLogLevel = "log_level"
)

// DefaultHTTPPorts are the ports the containers' agents use by default:
// clear of GPUlayer's own 4656-4658, of the tests' 10000-19999 and of the
// dynamic ports given to tasks (20000-32000).
const DefaultHTTPPorts = "4700-4799"

// Defaults and bounds of the resource keys.
const (
	DefaultMemoryMB = 1024
	DefaultPids     = 1024
	DefaultNanoCPUs = 1_000_000_000

	maxPorts = 4096
	// minHTTPPort is the lowest port an agent may listen on: the
	// containers share the host's network, and the ports below are the
	// host's privileged services'.
	minHTTPPort = 1024
)

// Settings are a pool's parsed ProviderConfig.
type Settings struct {
	Image     string
	Binary    string
	MemoryMB  int64
	Pids      int64
	NanoCPUs  int64
	HTTPPorts []int
	LogLevel  string
}

var imageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:@-]{0,254}$`)

// ParseSettings reads a pool's ProviderConfig. Unknown keys are refused
// (a typo would otherwise be silently ignored).
func ParseSettings(pc map[string]string) (Settings, error) {
	s := Settings{MemoryMB: DefaultMemoryMB, Pids: DefaultPids, NanoCPUs: DefaultNanoCPUs, LogLevel: "INFO"}
	ports, err := parsePorts(DefaultHTTPPorts)
	if err != nil {
		return s, err
	}
	s.HTTPPorts = ports
	for k, v := range pc {
		switch k {
		case KeyImage:
			if !imageRE.MatchString(v) {
				return s, fmt.Errorf("%w: %s: %q is not an image reference", ErrConfig, k, v)
			}
			s.Image = v
		case KeyBinary:
			if !filepath.IsAbs(v) || filepath.Clean(v) != v {
				return s, fmt.Errorf("%w: %s: %q must be a clean absolute path", ErrConfig, k, v)
			}
			s.Binary = v
		case KeyMemoryMB:
			if s.MemoryMB, err = parseInt(k, v, 64, 1<<20); err != nil {
				return s, err
			}
		case KeyPids:
			if s.Pids, err = parseInt(k, v, 16, 65536); err != nil {
				return s, err
			}
		case KeyCPUs:
			f, err := strconv.ParseFloat(v, 64)
			// !(f >= 0.01 && f <= 1024) also refuses NaN, for which
			// every comparison is false.
			if err != nil || !(f >= 0.01 && f <= 1024) {
				return s, fmt.Errorf("%w: %s: %q must be a number of CPUs between 0.01 and 1024", ErrConfig, k, v)
			}
			s.NanoCPUs = int64(f * 1e9)
		case KeyHTTPPorts:
			if s.HTTPPorts, err = parsePorts(v); err != nil {
				return s, err
			}
		case KeyLogLevel:
			switch u := strings.ToUpper(v); u {
			case "TRACE", "DEBUG", "INFO", "WARN", "ERROR":
				s.LogLevel = u
			default:
				return s, fmt.Errorf("%w: %s: %q is not TRACE, DEBUG, INFO, WARN or ERROR", ErrConfig, k, v)
			}
		default:
			return s, fmt.Errorf("%w: unknown key %q (known: %s)", ErrConfig, k,
				strings.Join([]string{KeyImage, KeyBinary, KeyMemoryMB, KeyPids, KeyCPUs, KeyHTTPPorts, KeyLogLevel}, ", "))
		}
	}
	return s, nil
}

func parseInt(key, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s: %q must be a whole number between %d and %d", ErrConfig, key, v, lo, hi)
	}
	return n, nil
}

// parsePorts reads "a-b,c" into the sorted distinct ports it names.
func parsePorts(spec string) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err1 != nil || err2 != nil || a < minHTTPPort || b > 65535 || a > b {
			return nil, fmt.Errorf("%w: %s: %q is not a port or a range of ports (%d-65535)", ErrConfig, KeyHTTPPorts, part, minHTTPPort)
		}
		if len(out)+(b-a+1) > maxPorts {
			return nil, fmt.Errorf("%w: %s: at most %d ports", ErrConfig, KeyHTTPPorts, maxPorts)
		}
		for p := a; p <= b; p++ {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: names no port", ErrConfig, KeyHTTPPorts)
	}
	slices.Sort(out)
	return out, nil
}
