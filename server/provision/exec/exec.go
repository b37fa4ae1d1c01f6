// Package exec is the provider that runs the user's own program for each
// call: `<command> create|terminate|list`, one JSON object on stdin, one
// JSON object on stdout (the protocol is in protocol.go and
// website/docs/provisioning.md). A script wrapping a cloud CLI is a
// provider; so is, later, a plugin binary speaking the same JSON.
//
// The program runs without a shell (config values are never interpreted),
// in its own process group with a minimal environment, from "/", under a
// deadline that kills the whole group. Its stdout is bounded (MaxStdout),
// and the last MaxStderrTail bytes of its stderr go into the error of a
// failed call.
package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/server/provision"
)

// Name is the provider's name in a pool's scaling block.
const Name = "exec"

// Limits on the program's output and the provider's config.
const (
	// MaxStdout bounds the program's stdout, in bytes (1 MiB). A program
	// that prints more is killed and the call fails.
	MaxStdout = 1 << 20
	// MaxStderrTail is how many bytes of the end of stderr a failed
	// call's error quotes (4 KiB).
	MaxStderrTail = 4 << 10

	// DefaultTimeout is a call's deadline when the config names none;
	// MaxTimeout the longest "timeout" accepted.
	DefaultTimeout = 60 * time.Second
	MinTimeout     = time.Second
	MaxTimeout     = 30 * time.Minute

	maxConfigKeys     = 64
	maxConfigKeyLen   = 128
	maxConfigValueLen = 4096
	maxPassEnv        = 32
)

// Config keys the provider itself reads; every other key of the pool's
// ProviderConfig is handed to the program in the request's "config".
const (
	KeyCommand = "command"  // absolute path of the program
	KeyTimeout = "timeout"  // a Go duration, "90s"; default DefaultTimeout
	KeyPassEnv = "pass_env" // comma-separated names of server environment variables the program gets
)

// Errors a call can return, wrapped with the details (errors.Is).
var (
	// ErrConfig: the pool's provider config is unusable (names the key).
	ErrConfig = errors.New("exec provider config")
	// ErrCommandFailed: the program could not start or exited non-zero;
	// the error quotes the tail of its stderr.
	ErrCommandFailed = errors.New("exec provider command failed")
	// ErrBadOutput: stdout was not the one JSON object the protocol
	// asks for (names the field or byte offset), or was too large.
	ErrBadOutput = errors.New("exec provider bad output")
)

// Config is an exec provider's settings, from a pool's ProviderConfig
// (ParseConfig).
type Config struct {
	// Command is the program's absolute path.
	Command string
	// Timeout bounds each call (with the caller's ctx deadline, whichever
	// comes first). Zero means DefaultTimeout.
	Timeout time.Duration
	// PassEnv names variables of the server's environment passed to the
	// program as they are (e.g. HOME, AWS_PROFILE). Names starting with
	// GPULAYER_ or NOMAD_ are refused: the server's secrets stay out.
	PassEnv []string
	// Extra is the rest of the ProviderConfig, sent as the request's
	// "config" object.
	Extra map[string]string
	// Logger; nil means none.
	Logger hclog.Logger
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// ParseConfig reads a pool's ProviderConfig: "command" (required, an
// absolute path to an executable regular file), "timeout" (optional Go
// duration between 1s and 30m), "pass_env" (optional comma-separated
// variable names); the other keys become Extra. Errors wrap ErrConfig and
// name the key.
func ParseConfig(pc map[string]string) (Config, error) {
	var c Config
	if len(pc) > maxConfigKeys {
		return c, fmt.Errorf("%w: at most %d keys, got %d", ErrConfig, maxConfigKeys, len(pc))
	}
	c.Extra = map[string]string{}
	for k, v := range pc {
		if k == "" || len(k) > maxConfigKeyLen || hasControl(k) {
			return c, fmt.Errorf("%w: key %q: must be 1 to %d printable bytes", ErrConfig, k, maxConfigKeyLen)
		}
		if len(v) > maxConfigValueLen {
			return c, fmt.Errorf("%w: %s: value of %d bytes, at most %d", ErrConfig, k, len(v), maxConfigValueLen)
		}
		switch k {
		case KeyCommand, KeyTimeout, KeyPassEnv:
		default:
			c.Extra[k] = v
		}
	}
	c.Command = pc[KeyCommand]
	if err := checkCommand(c.Command); err != nil {
		return c, err
	}
	if s := pc[KeyTimeout]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return c, fmt.Errorf("%w: %s: %q is not a duration such as \"90s\"", ErrConfig, KeyTimeout, s)
		}
		if d < MinTimeout || d > MaxTimeout {
			return c, fmt.Errorf("%w: %s: %s is outside %s to %s", ErrConfig, KeyTimeout, d, MinTimeout, MaxTimeout)
		}
		c.Timeout = d
	}
	if s := pc[KeyPassEnv]; s != "" {
		for _, n := range strings.Split(s, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if !envNameRE.MatchString(n) {
				return c, fmt.Errorf("%w: %s: %q is not an environment variable name", ErrConfig, KeyPassEnv, n)
			}
			if u := strings.ToUpper(n); strings.HasPrefix(u, "GPULAYER_") || strings.HasPrefix(u, "NOMAD_") {
				return c, fmt.Errorf("%w: %s: %q: GPULAYER_ and NOMAD_ variables are the server's and are never passed", ErrConfig, KeyPassEnv, n)
			}
			c.PassEnv = append(c.PassEnv, n)
		}
		if len(c.PassEnv) > maxPassEnv {
			return c, fmt.Errorf("%w: %s: at most %d names, got %d", ErrConfig, KeyPassEnv, maxPassEnv, len(c.PassEnv))
		}
	}
	return c, nil
}

// checkCommand refuses anything but an absolute, clean path to an
// executable regular file.
func checkCommand(cmd string) error {
	switch {
	case cmd == "":
		return fmt.Errorf("%w: %s: required (the absolute path of the provider program)", ErrConfig, KeyCommand)
	case !filepath.IsAbs(cmd) || filepath.Clean(cmd) != cmd:
		return fmt.Errorf("%w: %s: %q must be a clean absolute path", ErrConfig, KeyCommand, cmd)
	}
	fi, err := os.Stat(cmd)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrConfig, KeyCommand, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%w: %s: %s is not an executable file (mode %s)", ErrConfig, KeyCommand, cmd, fi.Mode())
	}
	return checkReplaceable(cmd)
}

// checkReplaceable refuses a program that a user other than root or the
// server's own could replace between this check and the exec, or at any
// time: the file, a symlink on the way or a directory above either the
// path or its target that is writable by others (a sticky directory such
// as /tmp excepted), or owned by another user. What runs is then the
// file the server's operator put there (ssh's StrictModes, for a program).
func checkReplaceable(cmd string) error {
	resolved, err := filepath.EvalSymlinks(cmd)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrConfig, KeyCommand, err)
	}
	euid := uint32(os.Geteuid())
	check := func(path string, isDir bool) error {
		fi, err := os.Lstat(path)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrConfig, KeyCommand, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			// A link's own mode means nothing; where it points is
			// checked through resolved and its directories.
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && st.Uid != euid {
			return fmt.Errorf("%w: %s: %s is owned by uid %d, not root or this server's user; another user could replace the program",
				ErrConfig, KeyCommand, path, st.Uid)
		}
		if fi.Mode().Perm()&0o002 != 0 && !(isDir && fi.Mode()&os.ModeSticky != 0) {
			return fmt.Errorf("%w: %s: %s is writable by any user (mode %s); another user could replace the program",
				ErrConfig, KeyCommand, path, fi.Mode())
		}
		return nil
	}
	seen := map[string]bool{}
	for _, p := range []string{cmd, resolved} {
		if err := check(p, false); err != nil {
			return err
		}
		for dir := filepath.Dir(p); !seen[dir]; dir = filepath.Dir(dir) {
			seen[dir] = true
			if err := check(dir, true); err != nil {
				return err
			}
			if dir == "/" {
				break
			}
		}
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// Provider runs one pool's program. It is safe for concurrent use; each
// call is its own process.
type Provider struct {
	cfg    Config
	logger hclog.Logger
}

var _ provision.Provider = (*Provider)(nil)

// New returns the provider for cfg (see ParseConfig). It checks that the
// command exists and is executable now; each call checks again.
func New(cfg Config) (*Provider, error) {
	if err := checkCommand(cfg.Command); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout < MinTimeout || cfg.Timeout > MaxTimeout {
		return nil, fmt.Errorf("%w: %s: %s is outside %s to %s", ErrConfig, KeyTimeout, cfg.Timeout, MinTimeout, MaxTimeout)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Provider{cfg: cfg, logger: cfg.Logger.Named("provider.exec")}, nil
}

// FromPoolConfig is ParseConfig then New: the provider of one pool.
func FromPoolConfig(pc map[string]string, logger hclog.Logger) (*Provider, error) {
	cfg, err := ParseConfig(pc)
	if err != nil {
		return nil, err
	}
	cfg.Logger = logger
	return New(cfg)
}

// Name returns "exec".
func (p *Provider) Name() string { return Name }

// Create runs `<command> create`. The program must make at most one host
// per idempotency_key and print the host's id. Errors wrap
// ErrCommandFailed, ErrBadOutput or the ctx error.
func (p *Provider) Create(ctx context.Context, req provision.CreateRequest) (provision.Host, error) {
	in := newCreateRequest(req, p.cfg.Extra)
	var out CreateResponse
	if err := p.call(ctx, OpCreate, in, &out); err != nil {
		return provision.Host{}, err
	}
	if err := out.validate(req); err != nil {
		return provision.Host{}, p.wrapOutput(OpCreate, err)
	}
	h := provision.Host{ID: out.ID, Pool: req.Pool, IdempotencyKey: req.IdempotencyKey, NodeName: out.NodeName, State: out.State}
	if h.NodeName == "" {
		h.NodeName = req.NodeName
	}
	return h, nil
}

// Terminate runs `<command> terminate`. The program must succeed (exit 0,
// print {}) when the host is already gone.
func (p *Provider) Terminate(ctx context.Context, pool, hostID string) error {
	var out TerminateResponse
	return p.call(ctx, OpTerminate, TerminateRequest{Protocol: ProtocolVersion, Op: OpTerminate, Pool: pool, ID: hostID, Config: p.cfg.Extra}, &out)
}

// List runs `<command> list` and returns its hosts; a host the program
// printed without a pool gets the requested one.
func (p *Provider) List(ctx context.Context, pool string) ([]provision.Host, error) {
	var out ListResponse
	if err := p.call(ctx, OpList, ListRequest{Protocol: ProtocolVersion, Op: OpList, Pool: pool, Config: p.cfg.Extra}, &out); err != nil {
		return nil, err
	}
	if err := out.validate(); err != nil {
		return nil, p.wrapOutput(OpList, err)
	}
	hosts := make([]provision.Host, 0, len(out.Hosts))
	for _, h := range out.Hosts {
		if h.Pool == "" {
			h.Pool = pool
		}
		hosts = append(hosts, provision.Host{ID: h.ID, Pool: h.Pool, IdempotencyKey: h.IdempotencyKey, NodeName: h.NodeName, State: h.State})
	}
	return hosts, nil
}

func (p *Provider) wrapOutput(op string, err error) error {
	return fmt.Errorf("%w: %s %s: %w", ErrBadOutput, p.cfg.Command, op, err)
}

// call runs the program for op with in on stdin and decodes its stdout
// into out.
func (p *Provider) call(ctx context.Context, op string, in, out any) error {
	stdin, err := encodeRequest(in)
	if err != nil {
		return err
	}
	if err := checkCommand(p.cfg.Command); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	start := time.Now()
	stdout, stderr, runErr := p.run(ctx, op, stdin)
	p.logger.Debug("provider program ran", "op", op, "command", p.cfg.Command, "duration", time.Since(start), "error", runErr)
	if runErr != nil {
		return runErr
	}
	if err := decodeObject(stdout, out); err != nil {
		return fmt.Errorf("%w: %s %s: %w%s", ErrBadOutput, p.cfg.Command, op, err, quoteTail(stderr))
	}
	return nil
}

// run starts the program in its own process group and waits for it. The
// group is killed at the deadline, when stdout passes MaxStdout, and after
// the program exits (anything it left behind).
func (p *Provider) run(ctx context.Context, op string, stdin []byte) (stdout []byte, stderrTail string, err error) {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := osexec.CommandContext(runCtx, p.cfg.Command, op)
	cmd.Dir = "/"
	cmd.Env = p.environ(op)
	cmd.Stdin = bytes.NewReader(stdin)
	outBuf := &limitedBuffer{max: MaxStdout, overflow: stop}
	errBuf := &tailBuffer{max: MaxStderrTail}
	cmd.Stdout, cmd.Stderr = outBuf, errBuf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	// A child that keeps stdout open after the program exits is cut off
	// after this long (and killed with the group below).
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("%w: %s %s: start: %w", ErrCommandFailed, p.cfg.Command, op, err)
	}
	waitErr := cmd.Wait()
	_ = killGroup(cmd.Process.Pid)
	tail := errBuf.String()
	switch {
	case outBuf.over:
		return nil, tail, fmt.Errorf("%w: %s %s: stdout exceeds %d bytes; the program was killed", ErrBadOutput, p.cfg.Command, op, MaxStdout)
	case ctx.Err() != nil:
		return nil, tail, fmt.Errorf("%w: %s %s: killed (process group) after the deadline (timeout %s): %w%s",
			ErrCommandFailed, p.cfg.Command, op, p.cfg.Timeout, ctx.Err(), quoteTail(tail))
	case waitErr != nil && !errors.Is(waitErr, osexec.ErrWaitDelay):
		return nil, tail, fmt.Errorf("%w: %s %s: %v%s", ErrCommandFailed, p.cfg.Command, op, waitErr, quoteTail(tail))
	}
	return outBuf.Bytes(), tail, nil
}

// environ is the program's whole environment: a fixed PATH, LANG=C, the
// protocol version and op, and the PassEnv variables that are set.
func (p *Provider) environ(op string) []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C",
		fmt.Sprintf("GPULAYER_PROVIDER_PROTOCOL=%d", ProtocolVersion),
		"GPULAYER_PROVIDER_OP=" + op,
	}
	names := append([]string(nil), p.cfg.PassEnv...)
	sort.Strings(names)
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// killGroup sends SIGKILL to the process group led by pid; a group that
// is gone already is not an error.
func killGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func quoteTail(tail string) string {
	tail = strings.TrimSpace(tail)
	if tail == "" {
		return ""
	}
	return "; stderr: " + tail
}

// limitedBuffer keeps up to max bytes; one write past it sets over, calls
// overflow (which kills the program) and fails. It has no ReadFrom, so
// io.Copy goes through Write.
type limitedBuffer struct {
	buf      bytes.Buffer
	max      int
	over     bool
	overflow func()
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.over {
		return 0, errStdoutFull
	}
	if b.buf.Len()+len(p) > b.max {
		b.over = true
		b.overflow()
		return 0, errStdoutFull
	}
	return b.buf.Write(p)
}

// Bytes returns what was kept.
func (b *limitedBuffer) Bytes() []byte { return b.buf.Bytes() }

var errStdoutFull = errors.New("stdout limit reached")

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= b.max {
		b.buf = append(b.buf[:0], p[len(p)-b.max:]...)
		return n, nil
	}
	if over := len(b.buf) + len(p) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

func (b *tailBuffer) String() string { return strings.ToValidUTF8(string(b.buf), "?") }
