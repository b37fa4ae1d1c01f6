// Package cgroups gives each native task a control group of its own, so
// the kernel enforces the task's memory and CPU and every process the task
// starts (a child that called setsid included) can be found and killed.
//
// Detect finds which cgroup interface the host lets us use: the unified
// hierarchy (cgroup v2, with the cpu and memory controllers), the legacy
// per-controller hierarchies (cgroup v1, memory and cpu), or none, with a
// plain reason. All tasks live under one parent cgroup ("gpulayer" by
// default), one directory per task named after the task's ID (see Name).
// The layout follows what Nomad's exec driver does (a "nomad" parent on
// v1, "nomad.slice" on v2), without systemd.
package cgroups

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// Mode is the cgroup interface a Manager uses.
type Mode string

// The modes Detect reports.
const (
	// ModeV2 is the unified hierarchy (cgroup v2).
	ModeV2 Mode = "v2"
	// ModeV1 is the legacy per-controller hierarchies (cgroup v1).
	ModeV1 Mode = "v1"
	// ModeNone means no limits are enforced; Manager.Reason says why.
	ModeNone Mode = "none"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrUnsupported is returned by Create and Open when the manager's
	// mode is ModeNone; the message carries the reason.
	ErrUnsupported = errors.New("cgroups are not usable on this host")
	// ErrInvalidName is returned for a task ID that cannot name a cgroup
	// (empty, or made only of slashes).
	ErrInvalidName = errors.New("task ID cannot name a cgroup")
	// ErrNotFound is returned by Open when the task has no cgroup.
	ErrNotFound = errors.New("task cgroup not found")
	// ErrBusy is returned by Kill and Destroy when processes are still in
	// the cgroup once the kill deadline passed.
	ErrBusy = errors.New("cgroup still has processes")
	// ErrNoController is returned by Create when limits are asked of a
	// manager without the cpu and memory controllers (Config.PlacementOnly),
	// and by CPUUsage when no controller accounts CPU time.
	ErrNoController = errors.New("cgroup controller not available")
)

// Defaults for Config's zero values.
const (
	// DefaultRoot is where the kernel's cgroup file systems are mounted.
	DefaultRoot = "/sys/fs/cgroup"
	// DefaultParent is the parent cgroup of every task.
	DefaultParent = "gpulayer"
)

// Config says where to look for cgroups. The zero value looks at the
// standard places.
type Config struct {
	// V2Root is the cgroup2 mount (default DefaultRoot). It is the unified
	// hierarchy when it holds a cgroup.controllers file.
	V2Root string
	// V1Root holds one mount per v1 controller, <V1Root>/memory and
	// <V1Root>/cpu (default DefaultRoot).
	V1Root string
	// Parent is the parent cgroup's path inside each hierarchy (default
	// DefaultParent).
	Parent string
	// PlacementOnly asks for a v2 hierarchy without the cpu and memory
	// controllers: tasks are placed and killed through cgroups, but no
	// limit can be set. Tests use it on a hybrid host's empty unified
	// hierarchy; it has no meaning for v1.
	PlacementOnly bool
	// Disable turns cgroups off: the manager's mode is ModeNone.
	Disable bool
	// Logger receives debug logs; nil discards them.
	Logger hclog.Logger
}

// hierarchy is one v1 controller hierarchy the manager uses.
type hierarchy struct {
	// Controller is the controller's name ("memory", "cpu", "cpuacct").
	Controller string
	// Mount is the hierarchy's mount point.
	Mount string
	// Parent is the parent cgroup's directory in it.
	Parent string
}

// Manager creates and opens task cgroups. It holds no per-task state and
// is safe for concurrent use.
type Manager struct {
	mode   Mode
	reason string
	logger hclog.Logger
	// v2 is the parent directory on v2.
	v2            string
	placementOnly bool
	// v1 are the hierarchies on v1: memory first, then cpu, then cpuacct
	// when it is mounted apart from cpu.
	v1 []hierarchy

	// mkdir and rmdir create and remove a cgroup directory; tests over a
	// plain directory replace them to play the kernel's part.
	mkdir func(path string) error
	rmdir func(path string) error
}

// Detect returns a manager for the best mode the host allows: v2 when
// cfg.V2Root is a cgroup2 mount with the cpu and memory controllers (or
// any cgroup2 mount with cfg.PlacementOnly) and the parent cgroup can be
// created with both controllers enabled for its children; else v1 when
// the memory and cpu hierarchies are mounted under cfg.V1Root and the
// parent can be created in both; else ModeNone, with Reason saying why in
// plain words. Detect creates the parent cgroup, so its later tasks only
// add their own directory. It never fails: a host without cgroups is a
// ModeNone manager.
func Detect(cfg Config) *Manager {
	return detect(cfg, mkdirCgroup, syscall.Rmdir)
}

// detect is Detect with the functions that create and remove a cgroup
// directory given.
func detect(cfg Config, mkdir, rmdir func(string) error) *Manager {
	m := &Manager{logger: cfg.Logger, mkdir: mkdir, rmdir: rmdir, placementOnly: cfg.PlacementOnly}
	if m.logger == nil {
		m.logger = hclog.NewNullLogger()
	}
	m.logger = m.logger.Named("cgroups")
	if cfg.V2Root == "" {
		cfg.V2Root = DefaultRoot
	}
	if cfg.V1Root == "" {
		cfg.V1Root = DefaultRoot
	}
	if cfg.Parent == "" {
		cfg.Parent = DefaultParent
	}
	switch {
	case cfg.Disable:
		m.mode, m.reason = ModeNone, "cgroups disabled by configuration"
	case runtime.GOOS != "linux":
		m.mode, m.reason = ModeNone, "cgroups exist only on Linux"
	default:
		if _, err := os.Stat(filepath.Join(cfg.V2Root, "cgroup.controllers")); err == nil {
			m.detectV2(cfg)
		} else {
			m.detectV1(cfg)
		}
	}
	m.logger.Debug("cgroup mode detected", "mode", m.mode, "reason", m.reason)
	return m
}

// Mode returns the mode the manager uses.
func (m *Manager) Mode() Mode { return m.mode }

// Reason says, in plain words, why the mode is ModeNone; it is empty
// otherwise.
func (m *Manager) Reason() string { return m.reason }

// none sets ModeNone with a reason.
func (m *Manager) none(format string, args ...interface{}) {
	m.mode, m.reason = ModeNone, fmt.Sprintf(format, args...)
}

// maxNameLen bounds a task cgroup's name; longer ones are cut and given a
// hash suffix. Linux file names may be 255 bytes.
const maxNameLen = 200

// Name returns the cgroup directory name of a task ID such as
// "<alloc-id>/<task>": ASCII letters, digits and '-' are kept, '/'
// becomes '.', and every other byte b becomes "_xx" (two hex digits), so
// distinct IDs get distinct names and a name never holds a '/' or is "."
// or "..". A name longer than 200 bytes is cut to 184 and ends with '_'
// and 16 hex digits of the ID's SHA-256. It returns ErrInvalidName for an
// empty ID or one made only of slashes.
func Name(taskID string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(taskID); i++ {
		c := taskID[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		case c == '/':
			b.WriteByte('.')
		default:
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	name := b.String()
	if strings.Trim(name, ".") == "" {
		return "", fmt.Errorf("%w: %q", ErrInvalidName, taskID)
	}
	if len(name) > maxNameLen {
		sum := sha256.Sum256([]byte(taskID))
		name = name[:184] + "_" + hex.EncodeToString(sum[:8])
	}
	return name, nil
}

// Limits are what the kernel enforces on a task's cgroup. The zero value
// sets no limit.
type Limits struct {
	// MemoryBytes is the hard memory limit in bytes (swap allowed: none);
	// 0 sets none.
	MemoryBytes int64
	// CPUShares is the task's relative CPU weight in cgroup v1 shares
	// (2 to 262144, the kernel's default being 1024); 0 leaves the
	// default. On v2 it is converted to cpu.weight (see CPUWeight).
	CPUShares uint64
	// CPUQuota and CPUPeriod, in microseconds, cap the task at CPUQuota of
	// CPU time per CPUPeriod over all its CPUs; CPUQuota 0 sets no cap.
	CPUQuota  int64
	CPUPeriod int64
}

// Bounds of the kernel's CPU figures.
const (
	// MinShares and MaxShares are the kernel's bounds of cpu.shares
	// (MIN_SHARES and MAX_SHARES, kernel/sched/sched.h).
	MinShares = 2
	MaxShares = 262144
	// DefaultCPUPeriod is the CFS period in microseconds used for a hard
	// CPU cap, the kernel's default cpu.cfs_period_us.
	DefaultCPUPeriod = 100000
	// MinCPUQuota is the smallest CFS quota the kernel accepts, in
	// microseconds (1 ms).
	MinCPUQuota = 1000
	// MaxMemoryMB and MaxCPUMHz are structs.MaxMemoryMB and
	// structs.MaxCPUMHz (TestLimitsMatchStructs), the largest task
	// resources a job may ask for. They are copied rather than imported
	// so that this package, which the native task shim imports, does not
	// pull structs and its dependencies into the shim's start (package
	// shim).
	MaxMemoryMB = 64 << 20
	MaxCPUMHz   = 1 << 24
)

// TaskLimits turns a task's resources into limits: memoryMB MiB as the
// hard memory limit, cpuMHz as CPU shares (1 MHz = 1 share, at least 2 and
// at most 262144, as the docker driver sets Docker's CPUShares), and, when
// hardCPU is set, a CPU cap of DefaultCPUPeriod * cpuMHz / mhzPerCore
// microseconds per period (at least MinCPUQuota): a task given 1000 MHz on
// a node of 2000 MHz cores may use half a core. A zero cpuMHz or memoryMB
// sets no limit of that kind. It returns an error when hardCPU is set
// without a CPU figure or without the node's MHz per core, and when
// memoryMB or cpuMHz is past MaxMemoryMB or MaxCPUMHz (MiB << 20 and the
// quota product would overflow int64 into a negative "no limit").
func TaskLimits(cpuMHz, memoryMB int64, hardCPU bool, mhzPerCore int64) (Limits, error) {
	var l Limits
	if memoryMB > MaxMemoryMB {
		return Limits{}, fmt.Errorf("memory of %d MiB is past the limit of %d MiB", memoryMB, MaxMemoryMB)
	}
	if cpuMHz > MaxCPUMHz {
		return Limits{}, fmt.Errorf("cpu of %d MHz is past the limit of %d MHz", cpuMHz, MaxCPUMHz)
	}
	if memoryMB > 0 {
		l.MemoryBytes = memoryMB << 20
	}
	if cpuMHz > 0 {
		l.CPUShares = uint64(min(max(cpuMHz, MinShares), MaxShares))
	}
	if hardCPU {
		if cpuMHz <= 0 {
			return Limits{}, errors.New("cpu_hard_limit needs the task's CPU resource (MHz)")
		}
		if mhzPerCore <= 0 {
			return Limits{}, errors.New("cpu_hard_limit needs the node's MHz per core, which is unknown")
		}
		l.CPUPeriod = DefaultCPUPeriod
		l.CPUQuota = max(DefaultCPUPeriod*cpuMHz/mhzPerCore, MinCPUQuota)
	}
	return l, nil
}

// CPUWeight converts cgroup v1 CPU shares to a cgroup v2 cpu.weight (1 to
// 10000) with the formula runc and crun use since 2025
// (opencontainers/cgroups ConvertCPUSharesToCgroupV2Value, runc pull
// request 4785): weight = ceil(10^((l² + 125·l) / 612 − 7/34)) with
// l = log2(shares), a curve through the three points (2, 1), (1024, 100)
// and (262144, 10000), so the v1 default of 1024 shares maps to the v2
// default weight of 100. The older linear formula, 1 + (shares − 2) ·
// 9999 / 262142, mapped 1024 to 39. It returns 0 for 0 shares (unset).
func CPUWeight(shares uint64) uint64 {
	switch {
	case shares == 0:
		return 0
	case shares <= MinShares:
		return 1
	case shares >= MaxShares:
		return 10000
	}
	l := math.Log2(float64(shares))
	exp := (l*l+125*l)/612.0 - 7.0/34.0
	return uint64(math.Ceil(math.Pow(10, exp)))
}

// plain turns a file system error into a few plain words for a reason.
func plain(err error) string {
	switch {
	case errors.Is(err, syscall.EROFS):
		return "read-only file system"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		if os.Geteuid() != 0 {
			return "permission denied: the agent does not run as root"
		}
		return "permission denied"
	case errors.Is(err, syscall.EBUSY):
		return "busy: the cgroup holds processes of its own"
	case errors.Is(err, os.ErrNotExist):
		return "not found"
	}
	return err.Error()
}

// mkdirCgroup creates one cgroup directory.
func mkdirCgroup(path string) error { return os.Mkdir(path, 0o755) }

// mkdirAll creates dir and the directories above it that are missing.
func (m *Manager) mkdirAll(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if up := filepath.Dir(dir); up != dir {
		if err := m.mkdirAll(up); err != nil {
			return err
		}
	}
	if err := m.mkdir(dir); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// writable reports an error when the directory cannot be written by us:
// a read-only mount or a lack of permission.
func writable(dir string) error {
	return syscall.Access(dir, 2 /* W_OK */)
}
