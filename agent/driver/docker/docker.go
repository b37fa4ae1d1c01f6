// Package docker runs tasks as Docker containers through the Docker Engine
// API (the official moby client). A container is labelled with its
// allocation and task, limited to the task's CPU share and memory, sees
// only the GPUs the plan gave it (a DeviceRequest for the nvidia runtime,
// by exact UUID), mounts nothing from the host outside its allocation
// directory, and has its stdout and stderr streamed into the task's log
// files. Containers are found again by ID after a client restart.
package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// Name is the driver's name in task specs.
const Name = "docker"

// Labels put on every container, tying it to its allocation.
const (
	labelPrefix  = "gpulayer."
	LabelAllocID = "gpulayer.alloc_id"
	LabelTask    = "gpulayer.task"
	LabelJob     = "gpulayer.job"
	LabelGroup   = "gpulayer.group"
)

// Container paths of the allocation directory and the task's directory.
const (
	ContainerAllocDir = "/alloc"
)

// Defaults for Config fields left zero.
const (
	DefaultPullTimeout = 5 * time.Minute
	DefaultAPITimeout  = 30 * time.Second
)

// logDrainTimeout bounds how long an exited container's remaining log
// output is still copied before its exit is reported.
const logDrainTimeout = 5 * time.Second

// Config configures the driver. Zero values get the documented defaults.
type Config struct {
	// Host is the Docker daemon address ("unix:///var/run/docker.sock");
	// empty means DOCKER_HOST or the platform default.
	Host string
	// Logger defaults to a null logger.
	Logger hclog.Logger
	// PullTimeout bounds an image pull; default 5 minutes.
	PullTimeout time.Duration
	// Allow is what tasks may ask of the host beyond a plain container;
	// the zero value allows nothing (see Allowances).
	Allow Allowances
}

// Driver is the docker driver. Create it with New.
type Driver struct {
	cfg    Config
	logger hclog.Logger
	api    *client.Client

	mu    sync.Mutex
	tasks map[string]*task
}

type task struct {
	id          string
	name        string
	containerID string
	// imageID is the container's resolved image ID, from the daemon's
	// inspect after start (or at recovery); "" when it did not answer.
	imageID string
	handle  *driver.TaskHandle
	done    chan struct{}

	mu          sync.Mutex
	result      *driver.ExitResult
	completedAt time.Time
}

func (t *task) finish(r *driver.ExitResult) {
	t.mu.Lock()
	t.result, t.completedAt = r, time.Now()
	t.mu.Unlock()
	close(t.done)
}

func (t *task) exit() (*driver.ExitResult, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.result, t.completedAt
}

var (
	_ driver.Driver   = (*Driver)(nil)
	_ driver.Signaler = (*Driver)(nil)
	_ driver.Execer   = (*Driver)(nil)
)

// New returns a docker driver. It does not contact the daemon: a host
// without Docker gets a driver whose Fingerprint reports it not detected.
// It fails only for an unusable Host address.
func New(cfg Config) (*Driver, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.PullTimeout <= 0 {
		cfg.PullTimeout = DefaultPullTimeout
	}
	opts := []client.Opt{client.FromEnv}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	api, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &Driver{cfg: cfg, logger: cfg.Logger.Named("docker"), api: api, tasks: map[string]*task{}}, nil
}

// Name returns "docker".
func (d *Driver) Name() string { return Name }

// Fingerprint pings the daemon. A daemon that does not answer within 5
// seconds leaves the driver not detected (a host without Docker simply
// lacks the driver). Attributes: driver.docker.version,
// driver.docker.api_version and driver.docker.runtime.nvidia ("1" when the
// nvidia runtime is installed, which GPU tasks need).
func (d *Driver) Fingerprint() *structs.DriverInfo {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := d.api.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return &structs.DriverInfo{Detected: false, Healthy: false, HealthDescription: "docker daemon unreachable: " + err.Error()}
	}
	attrs := map[string]string{"driver.docker.version": v.Version, "driver.docker.api_version": v.APIVersion}
	if info, err := d.api.Info(ctx, client.InfoOptions{}); err == nil {
		if _, ok := info.Info.Runtimes["nvidia"]; ok {
			attrs["driver.docker.runtime.nvidia"] = "1"
		}
	}
	return &structs.DriverInfo{Detected: true, Healthy: true, HealthDescription: "healthy", Attributes: attrs}
}

// containerName is "<task>-<alloc-id>", unique per task run.
func containerName(cfg *driver.TaskConfig) string {
	return cfg.Name + "-" + cfg.AllocID
}

// StartTask checks the config, pulls the image when it is missing, then
// creates and starts the container (its mount sources inside the
// allocation directory pinned until then, see pinMounts) and streams its
// output to cfg.Stdout and cfg.Stderr. Errors: driver.ErrInvalidConfig
// (wrapped, naming the key or mount) for a bad config or a mount source
// a task could swap, driver.ErrTaskExists for a duplicate ID, an
// error saying no registry can be reached when a missing image cannot be
// pulled, and the daemon's error when create or start fails (e.g. a GPU
// task on a host without the nvidia runtime).
func (d *Driver) StartTask(cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	if cfg == nil || cfg.ID == "" {
		return nil, fmt.Errorf("%w: task config without an ID", driver.ErrInvalidConfig)
	}
	allocDir := filepath.Dir(cfg.TaskDir)
	tc, err := parseConfig(cfg.Config, allocDir, d.cfg.Allow)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if _, ok := d.tasks[cfg.ID]; ok {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", driver.ErrTaskExists, cfg.ID)
	}
	d.tasks[cfg.ID] = nil
	d.mu.Unlock()
	t, err := d.start(cfg, tc, allocDir)
	d.mu.Lock()
	if err != nil {
		delete(d.tasks, cfg.ID)
	} else {
		d.tasks[cfg.ID] = t
	}
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c := *t.handle
	return &c, nil
}

func (d *Driver) start(cfg *driver.TaskConfig, tc *taskConfig, allocDir string) (*task, error) {
	if err := d.ensureImage(tc.Image); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultAPITimeout)
	defer cancel()
	name := containerName(cfg)
	// A container left by an earlier run of this task (a start that failed
	// half way, a client that died before recording it) is replaced.
	if _, err := d.api.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("remove old container %s: %w", name, err)
	}
	// The mount sources inside the allocation directory are pinned
	// until the container has started: Docker resolves their paths
	// again, and a task may rename entries on them meanwhile.
	mounts, release, err := pinMounts(allocDir, tc.Mounts)
	switch {
	case errors.Is(err, errNoPin):
		d.logger.Warn("cannot pin the task's mount sources; handing Docker their checked paths", "task_id", cfg.ID, "error", err)
		mounts = tc.Mounts
	case err != nil:
		return nil, fmt.Errorf("%w: %w", driver.ErrInvalidConfig, err)
	}
	defer release()
	pinned := *tc
	pinned.Mounts = mounts
	ccfg, hcfg, err := d.containerConfig(cfg, &pinned, allocDir)
	if err != nil {
		return nil, err
	}
	created, err := d.api.ContainerCreate(ctx, client.ContainerCreateOptions{Config: ccfg, HostConfig: hcfg, Name: name})
	if err != nil {
		return nil, fmt.Errorf("create container for image %q: %w", tc.Image, err)
	}
	if _, err := d.api.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		_, _ = d.api.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
		return nil, fmt.Errorf("start container for image %q: %w", tc.Image, err)
	}
	h := &driver.TaskHandle{ID: cfg.ID, Driver: Name, ContainerID: created.ID, StartedAt: time.Now()}
	var imageID string
	if ins, err := d.api.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{}); err == nil {
		if ins.Container.State != nil {
			h.PID = ins.Container.State.Pid
		}
		imageID = ins.Container.Image
	}
	t := &task{id: cfg.ID, name: cfg.Name, containerID: created.ID, imageID: imageID, handle: h, done: make(chan struct{})}
	d.watch(t, cfg, "")
	d.logger.Debug("container started", "task_id", cfg.ID, "container_id", created.ID, "image", tc.Image)
	return t, nil
}

// containerConfig builds the container's config and host config.
func (d *Driver) containerConfig(cfg *driver.TaskConfig, tc *taskConfig, allocDir string) (*container.Config, *container.HostConfig, error) {
	// The allocation directory is mounted at /alloc: the task sees its
	// directories at their container paths.
	env := make([]string, 0, len(cfg.Env)+2)
	for k, v := range cfg.Env {
		switch k {
		case "GPULAYER_ALLOC_DIR", "GPULAYER_TASK_DIR", "GPULAYER_OUTPUT_DIR", "NOMAD_TASK_DIR", "NOMAD_SECRETS_DIR":
		default:
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "GPULAYER_ALLOC_DIR="+ContainerAllocDir, "GPULAYER_TASK_DIR="+ContainerAllocDir+"/"+cfg.Name)
	if _, ok := cfg.Env["NOMAD_TASK_DIR"]; ok {
		env = append(env, "NOMAD_TASK_DIR="+ContainerAllocDir+"/"+cfg.Name+"/local",
			"NOMAD_SECRETS_DIR="+ContainerAllocDir+"/"+cfg.Name+"/secrets")
	}
	if _, ok := cfg.Env["GPULAYER_OUTPUT_DIR"]; ok {
		env = append(env, "GPULAYER_OUTPUT_DIR="+ContainerAllocDir+"/"+cfg.Name+"/outputs")
	}
	sort.Strings(env)
	labels := map[string]string{}
	for k, v := range tc.Labels {
		labels[k] = v
	}
	labels[LabelAllocID] = cfg.AllocID
	labels[LabelTask] = cfg.Name
	labels[LabelJob] = cfg.JobName
	labels[LabelGroup] = cfg.TaskGroup
	cc := &container.Config{
		Image:      tc.Image,
		Env:        env,
		Labels:     labels,
		WorkingDir: tc.WorkDir,
		Cmd:        tc.Args,
	}
	if tc.Command != "" {
		cc.Entrypoint = []string{tc.Command}
	}
	hc := &container.HostConfig{
		// The daemon keeps the output in its json-file log, which the
		// driver follows and copies into the task's rotated files. Its
		// own rotation is set large (3 × 64 MiB): a follower crossing a
		// json-file rotation can miss lines (seen with Docker 20.10 at
		// 10 MiB), and the files also hold what a task writes while no
		// client copies it.
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "64m", "max-file": "3"}},
		Mounts: []mount.Mount{{
			Type: mount.TypeBind, Source: allocDir, Target: ContainerAllocDir,
		}},
	}
	applyAllowed(tc, hc)
	for _, m := range tc.Mounts {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	if len(tc.Ports) > 0 {
		cc.ExposedPorts = network.PortSet{}
		hc.PortBindings = network.PortMap{}
		for _, p := range tc.Ports {
			port, err := network.ParsePort(strconv.Itoa(p.ContainerPort) + "/" + p.Proto)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: key \"ports\": %v", driver.ErrInvalidConfig, err)
			}
			ip, err := netip.ParseAddr(p.HostIP)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: key \"ports\": host IP %q: %v", driver.ErrInvalidConfig, p.HostIP, err)
			}
			cc.ExposedPorts[port] = struct{}{}
			hc.PortBindings[port] = append(hc.PortBindings[port], network.PortBinding{HostIP: ip, HostPort: strconv.Itoa(p.HostPort)})
		}
	}
	// The group's network ports: host port -> its "to" port (tcp).
	for _, p := range cfg.Ports {
		to := p.To
		if to <= 0 {
			to = p.Value
		}
		port, err := network.ParsePort(strconv.Itoa(to) + "/tcp")
		if err != nil {
			return nil, nil, fmt.Errorf("%w: port %q: %v", driver.ErrInvalidConfig, p.Label, err)
		}
		ip, err := netip.ParseAddr(p.HostIP)
		if err != nil {
			ip = netip.IPv4Unspecified()
		}
		if cc.ExposedPorts == nil {
			cc.ExposedPorts, hc.PortBindings = network.PortSet{}, network.PortMap{}
		}
		cc.ExposedPorts[port] = struct{}{}
		hc.PortBindings[port] = append(hc.PortBindings[port], network.PortBinding{HostIP: ip, HostPort: strconv.Itoa(p.Value)})
	}
	if r := cfg.Resources; r != nil {
		// CPU in MHz becomes relative shares, as Nomad's docker driver
		// does (cpu_shares = MHz); memory is a hard limit in bytes.
		if r.CPU > 0 {
			hc.CPUShares = max(r.CPU, 2)
		}
		if r.MemoryMB > structs.MaxMemoryMB || r.CPU > structs.MaxCPUMHz {
			// MiB << 20 past the limit would overflow into a negative
			// Memory, which Docker reads as unlimited.
			return nil, nil, fmt.Errorf("%w: resources of %d MHz and %d MiB are past the limits (%d MHz, %d MiB)",
				driver.ErrInvalidConfig, r.CPU, r.MemoryMB, structs.MaxCPUMHz, structs.MaxMemoryMB)
		}
		if r.MemoryMB > 0 {
			hc.Memory = r.MemoryMB << 20
			hc.MemorySwap = hc.Memory
		}
		if ids := r.GPUIDs(); len(ids) > 0 {
			hc.DeviceRequests = []container.DeviceRequest{{
				Driver:       "nvidia",
				DeviceIDs:    ids,
				Capabilities: [][]string{{"gpu"}},
			}}
		}
	}
	return cc, hc, nil
}

// ErrPullFailed is wrapped by the error of a task whose image is missing
// and could not be pulled.
var ErrPullFailed = errors.New("no registry can be reached")

// ensureImage pulls image only when the daemon does not have it.
func (d *Driver) ensureImage(image string) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.PullTimeout)
	defer cancel()
	if _, err := d.api.ImageInspect(ctx, image); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %q: %w", image, err)
	}
	d.logger.Info("pulling image", "image", image)
	resp, err := d.api.ImagePull(ctx, image, client.ImagePullOptions{})
	if err == nil {
		err = resp.Wait(ctx)
		resp.Close()
	}
	if err != nil {
		return fmt.Errorf("image %q is not on this host and pulling it failed (%w): %v", image, ErrPullFailed, err)
	}
	return nil
}

// watch waits for the container to exit and copies its logs until then,
// then finishes the task. since is the log position to resume from
// (RFC 3339 with nanoseconds), empty for everything.
func (d *Driver) watch(t *task, cfg *driver.TaskConfig, since string) {
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		d.streamLogs(t, cfg, since)
	}()
	go func() {
		res := d.waitExit(t.containerID)
		select {
		case <-logsDone:
		case <-time.After(logDrainTimeout):
			d.logger.Warn("container logs still streaming after exit; reporting exit", "task_id", t.id)
		}
		t.finish(res)
		d.logger.Debug("container exited", "task_id", t.id, "exit_code", res.ExitCode)
	}()
}

// waitExit blocks until the container is not running and returns how it
// ended.
func (d *Driver) waitExit(id string) *driver.ExitResult {
	for attempt := 0; ; attempt++ {
		w := d.api.ContainerWait(context.Background(), id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case r := <-w.Result:
			res := &driver.ExitResult{ExitCode: int(r.StatusCode)}
			if r.Error != nil && r.Error.Message != "" {
				res.Err = errors.New(r.Error.Message)
			}
			ctx, cancel := context.WithTimeout(context.Background(), DefaultAPITimeout)
			if ins, err := d.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil && ins.Container.State != nil {
				res.OOMKilled = ins.Container.State.OOMKilled
			}
			cancel()
			return res
		case err := <-w.Error:
			if cerrdefs.IsNotFound(err) || attempt >= 5 {
				return &driver.ExitResult{ExitCode: -1, Err: fmt.Errorf("wait for container %s: %w", shortID(id), err)}
			}
			time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		}
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func (d *Driver) lookup(taskID string) (*task, error) {
	return driver.LookupTask(&d.mu, d.tasks, taskID)
}

// WaitTask returns a channel that gets the task's exit result once and is
// then closed; it is closed without a value if ctx ends first. Unknown IDs
// return driver.ErrTaskNotFound.
func (d *Driver) WaitTask(ctx context.Context, taskID string) (<-chan *driver.ExitResult, error) {
	t, err := d.lookup(taskID)
	if err != nil {
		return nil, err
	}
	return driver.WaitDone(ctx, t.done, func() *driver.ExitResult {
		r, _ := t.exit()
		return r
	}), nil
}

// StopTask sends signal (default SIGTERM) to the container, waits up to
// timeout (default 5 seconds) for it to exit, then kills it with SIGKILL.
// It returns once the task has exited, driver.ErrTaskNotFound for an
// unknown ID.
func (d *Driver) StopTask(taskID string, timeout time.Duration, signal string) error {
	t, err := d.lookup(taskID)
	if err != nil {
		return err
	}
	if signal == "" {
		signal = driver.DefaultKillSignal
	}
	if timeout <= 0 {
		timeout = driver.DefaultKillTimeout
	}
	select {
	case <-t.done:
		return nil
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultAPITimeout)
	defer cancel()
	if _, err := d.api.ContainerKill(ctx, t.containerID, client.ContainerKillOptions{Signal: normalizeSignal(signal)}); err != nil && !isNotRunning(err) {
		d.logger.Warn("signal container failed", "task_id", taskID, "signal", signal, "error", err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-t.done:
		return nil
	case <-timer.C:
	}
	if _, err := d.api.ContainerKill(ctx, t.containerID, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil && !isNotRunning(err) {
		return fmt.Errorf("kill container %s: %w", shortID(t.containerID), err)
	}
	select {
	case <-t.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("container %s did not exit 10 seconds after SIGKILL", shortID(t.containerID))
	}
}

// isNotRunning reports a kill refused because the container already
// stopped (the daemon answers 409 Conflict).
func isNotRunning(err error) bool {
	return cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err)
}

// normalizeSignal turns "TERM" or "sigterm" into "SIGTERM".
func normalizeSignal(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	return s
}

// SignalTask sends signal to the container's main process. It returns
// driver.ErrTaskNotFound for an unknown or exited task.
func (d *Driver) SignalTask(taskID, signal string) error {
	t, err := d.lookup(taskID)
	if err != nil {
		return err
	}
	if strings.TrimSpace(signal) == "" {
		return fmt.Errorf("%w: no signal named", driver.ErrInvalidConfig)
	}
	select {
	case <-t.done:
		return fmt.Errorf("%w: task %s has exited", driver.ErrTaskNotFound, taskID)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultAPITimeout)
	defer cancel()
	if _, err := d.api.ContainerKill(ctx, t.containerID, client.ContainerKillOptions{Signal: normalizeSignal(signal)}); err != nil {
		if cerrdefs.IsInvalidArgument(err) {
			return fmt.Errorf("%w: signal %q: %v", driver.ErrInvalidConfig, signal, err)
		}
		return fmt.Errorf("signal container %s: %w", shortID(t.containerID), err)
	}
	return nil
}

// InspectTask returns the task's status, with the container's resolved
// image ID (TaskStatus.ImageID), or driver.ErrTaskNotFound.
func (d *Driver) InspectTask(taskID string) (*driver.TaskStatus, error) {
	t, err := d.lookup(taskID)
	if err != nil {
		return nil, err
	}
	st := &driver.TaskStatus{ID: t.id, Name: t.name, PID: t.handle.PID, StartedAt: t.handle.StartedAt, State: driver.TaskStateRunning, ImageID: t.imageID}
	select {
	case <-t.done:
		st.State = driver.TaskStateExited
		st.ExitResult, st.CompletedAt = t.exit()
	default:
	}
	return st, nil
}

// RecoverTask finds the container of a handle saved before a client
// restart by its ID. A running container is tracked again and its logs
// resume where the last client stopped (the position kept under
// cfg.LogDir); an exited one is known with its exit code. It returns
// driver.ErrTaskNotFound when the container no longer exists.
func (d *Driver) RecoverTask(h *driver.TaskHandle, cfg *driver.TaskConfig) error {
	if h == nil || h.ContainerID == "" {
		return fmt.Errorf("%w: handle without a container ID", driver.ErrTaskNotFound)
	}
	if cfg == nil {
		cfg = &driver.TaskConfig{ID: h.ID}
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultAPITimeout)
	defer cancel()
	ins, err := d.api.ContainerInspect(ctx, h.ContainerID, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("%w: container %s is gone", driver.ErrTaskNotFound, shortID(h.ContainerID))
		}
		return fmt.Errorf("inspect container %s: %w", shortID(h.ContainerID), err)
	}
	d.mu.Lock()
	if d.tasks[h.ID] != nil {
		d.mu.Unlock()
		return nil
	}
	hc := *h
	t := &task{id: h.ID, name: cfg.Name, containerID: h.ContainerID, imageID: ins.Container.Image, handle: &hc, done: make(chan struct{})}
	d.tasks[h.ID] = t
	d.mu.Unlock()
	d.watch(t, cfg, readSince(cfg))
	d.logger.Debug("container recovered", "task_id", h.ID, "container_id", h.ContainerID, "running", ins.Container.State != nil && ins.Container.State.Running)
	return nil
}

// DestroyTask removes an exited task's container and forgets it. It
// returns driver.ErrTaskRunning for a running task and
// driver.ErrTaskNotFound for an unknown ID.
func (d *Driver) DestroyTask(taskID string) error {
	t, err := d.lookup(taskID)
	if err != nil {
		return err
	}
	select {
	case <-t.done:
	default:
		return fmt.Errorf("%w: %s", driver.ErrTaskRunning, taskID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultAPITimeout)
	defer cancel()
	if _, err := d.api.ContainerRemove(ctx, t.containerID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		d.logger.Warn("remove container", "task_id", taskID, "error", err)
	}
	d.mu.Lock()
	delete(d.tasks, taskID)
	d.mu.Unlock()
	return nil
}
