// Package docker is the provider whose hosts are containers on the local
// Docker engine, each running `gpulayer agent -client` with simulated GPUs
// of the pool's shape. The image is built on the engine FROM scratch from
// the gpulayer binary (no registry is needed; a dynamically linked
// binary brings its interpreter and libraries), or named by the pool's
// config.
//
// Networking: the containers use the host's network. Each agent listens
// on 127.0.0.1 at a port of its own (Settings.HTTPPorts), so the servers
// reach its HTTP API (log proxying) where they run, and it reaches the
// servers at the addresses they advertise, loopback included. The
// provider therefore runs beside the engine (a local DOCKER_HOST).
//
// Every container carries the labels LabelManaged, LabelPool,
// LabelIdempotencyKey and LabelNodeName; List finds hosts by them, and
// Create is idempotent on the key: the container's name is derived from
// pool and key, so the engine refuses a second one.
package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gpulayer/gpulayer/server/provision"
)

// Name is the provider's name in a pool's scaling block.
const Name = "docker"

// Labels on every container the provider makes.
const (
	LabelManaged        = "gpulayer.managed"
	LabelPool           = "gpulayer.pool"
	LabelIdempotencyKey = "gpulayer.idempotency-key"
	LabelNodeName       = "gpulayer.node-name"
	// LabelHTTPPort is the host port the container's agent listens on.
	LabelHTTPPort = "gpulayer.http-port"
)

// ConfigPath is where the agent config is written in the container (mode
// 0600: it holds the join token).
const ConfigPath = "/etc/gpulayer/agent.hcl"

// DataDir is the agent's data dir in the container.
const DataDir = "/data"

// stopTimeout is how long Terminate lets the agent stop before it is
// killed (at most half of what the ctx deadline leaves).
const stopTimeout = 10 * time.Second

// Config is the provider's settings for every pool; a pool's
// ProviderConfig (CreateRequest.Config) adds its Settings.
type Config struct {
	// Host is the engine's address ("unix:///var/run/docker.sock").
	// Empty means DOCKER_HOST, else the default socket.
	Host string
	// Binary is the gpulayer binary images are built from when a pool
	// names none. Empty means the running executable.
	Binary string
	// Logger; nil means none.
	Logger hclog.Logger
}

// Provider makes and removes containers on one engine. It is safe for
// concurrent use.
type Provider struct {
	cfg    Config
	logger hclog.Logger
	api    *client.Client

	// buildLock (capacity 1) serializes image builds and guards images.
	buildLock chan struct{}
	images    map[imageKey]builtImage
}

var _ provision.Provider = (*Provider)(nil)

// New returns a provider; it does not contact the engine until a call.
func New(cfg Config) (*Provider, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	opts := []client.Opt{client.FromEnv}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	api, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker provider: client: %w", err)
	}
	return &Provider{
		cfg: cfg, logger: cfg.Logger.Named("provider.docker"), api: api,
		buildLock: make(chan struct{}, 1), images: map[imageKey]builtImage{},
	}, nil
}

// FromPoolConfig checks a pool's ProviderConfig and returns a provider for
// it (the settings are read again at each Create, from its Config).
func FromPoolConfig(pc map[string]string, logger hclog.Logger) (*Provider, error) {
	s, err := ParseSettings(pc)
	if err != nil {
		return nil, err
	}
	return New(Config{Binary: s.Binary, Logger: logger})
}

// Close releases the engine connection.
func (p *Provider) Close() error { return p.api.Close() }

// Name returns "docker".
func (p *Provider) Name() string { return Name }

var nameCharRE = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// ContainerName is the name of the container for pool and key:
// "gpulayer-<pool>-<first 16 hex of sha256(pool, key)>", so a second
// create with the same key is refused by the engine.
func ContainerName(pool, key string) string {
	sum := sha256.Sum256([]byte(pool + "\x00" + key))
	p := nameCharRE.ReplaceAllString(pool, "_")
	if len(p) > 40 {
		p = p[:40]
	}
	return "gpulayer-" + p + "-" + hex.EncodeToString(sum[:8])
}

// Create returns the container of req.IdempotencyKey, making and starting
// it when there is none. A concurrent second call with the same key gets
// the container the first made. Errors: ErrConfig (wrapped, naming the
// key) for bad settings, the engine's errors, ctx's.
func (p *Provider) Create(ctx context.Context, req provision.CreateRequest) (provision.Host, error) {
	if err := checkRequest(req); err != nil {
		return provision.Host{}, err
	}
	s, err := ParseSettings(req.Config)
	if err != nil {
		return provision.Host{}, err
	}
	if h, c, err := p.findByKey(ctx, req.Pool, req.IdempotencyKey); err != nil {
		return provision.Host{}, err
	} else if c != nil {
		return p.resume(ctx, req, s, h, c)
	}
	image, err := p.ensureImage(ctx, s)
	if err != nil {
		return provision.Host{}, err
	}

	select {
	case portLock <- struct{}{}:
	case <-ctx.Done():
		return provision.Host{}, fmt.Errorf("docker provider: waiting to choose a port: %w", ctx.Err())
	}
	id, port, err := p.createContainer(ctx, req, s, image)
	<-portLock
	if errors.Is(err, errExists) {
		// A concurrent call (or an earlier one this caller lost track
		// of) made it: use that one.
		h, c, ferr := p.findByKey(ctx, req.Pool, req.IdempotencyKey)
		if ferr != nil {
			return provision.Host{}, ferr
		}
		if c == nil {
			return provision.Host{}, fmt.Errorf("docker provider: container %s exists but is not this pool's host for key %q", ContainerName(req.Pool, req.IdempotencyKey), req.IdempotencyKey)
		}
		return p.resume(ctx, req, s, h, c)
	}
	if err != nil {
		return provision.Host{}, err
	}
	if err := p.configureAndStart(ctx, req, s, id, port); err != nil {
		return provision.Host{}, err
	}
	p.logger.Info("host created", "container_id", id, "node_name", req.NodeName, "http_port", port, "image", image)
	return p.inspectHost(ctx, id)
}

// portLock (capacity 1) serializes choosing a port and creating the
// container that holds it (its label) across every Provider of the
// process (one per pool), so two creates never pick the same port.
var portLock = make(chan struct{}, 1)

// errExists says the container of the key's name exists already.
var errExists = errors.New("container exists")

// createContainer picks a free port and creates (not starts) the
// container; the caller holds portLock.
func (p *Provider) createContainer(ctx context.Context, req provision.CreateRequest, s Settings, image string) (string, int, error) {
	port, err := p.pickPort(ctx, s.HTTPPorts)
	if err != nil {
		return "", 0, err
	}
	labels := map[string]string{
		LabelManaged: "true", LabelPool: req.Pool, LabelIdempotencyKey: req.IdempotencyKey,
		LabelNodeName: req.NodeName, LabelHTTPPort: strconv.Itoa(port),
	}
	pids := s.Pids
	ccfg := &container.Config{
		Image:      image,
		Entrypoint: []string{AgentPath},
		Cmd:        []string{"agent", "-client", "-config", ConfigPath},
		Labels:     labels,
		Env:        []string{"GPULAYER_HOME=" + DataDir},
		WorkingDir: "/",
	}
	hcfg := &container.HostConfig{
		NetworkMode: "host",
		Resources: container.Resources{
			Memory: s.MemoryMB << 20, MemorySwap: s.MemoryMB << 20, NanoCPUs: s.NanoCPUs, PidsLimit: &pids,
		},
		// The agent comes back after a crash, a few times, with its
		// data dir (node ID and allocations) intact.
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyOnFailure, MaximumRetryCount: 3},
		LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}},
		SecurityOpt:   []string{"no-new-privileges:true"},
	}
	created, err := p.api.ContainerCreate(ctx, client.ContainerCreateOptions{Config: ccfg, HostConfig: hcfg, Name: ContainerName(req.Pool, req.IdempotencyKey)})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return "", 0, errExists
		}
		return "", 0, fmt.Errorf("docker provider: create container for pool %s: %w", req.Pool, err)
	}
	return created.ID, port, nil
}

// pickPort returns the lowest port of ports that no managed container
// holds and nothing listens on now.
func (p *Provider) pickPort(ctx context.Context, ports []int) (int, error) {
	res, err := p.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelManaged+"=true")})
	if err != nil {
		return 0, fmt.Errorf("docker provider: list containers: %w", err)
	}
	taken := map[int]bool{}
	for _, c := range res.Items {
		if n, err := strconv.Atoi(c.Labels[LabelHTTPPort]); err == nil {
			taken[n] = true
		}
	}
	for _, port := range ports {
		if taken[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = ln.Close()
		return port, nil
	}
	return 0, fmt.Errorf("docker provider: every port of %s (%d ports) is taken; widen it", KeyHTTPPorts, len(ports))
}

// resume returns an existing host, first configuring and starting it when
// an earlier call created it but did not get to start it.
func (p *Provider) resume(ctx context.Context, req provision.CreateRequest, s Settings, h provision.Host, c *container.Summary) (provision.Host, error) {
	if c.State != container.StateCreated {
		return h, nil
	}
	port, err := strconv.Atoi(c.Labels[LabelHTTPPort])
	if err != nil {
		return provision.Host{}, fmt.Errorf("docker provider: container %s has no %s label", c.ID, LabelHTTPPort)
	}
	// The config is written from the container's labels (its node name),
	// so every caller writes the same file.
	req.NodeName = c.Labels[LabelNodeName]
	if err := p.configureAndStart(ctx, req, s, c.ID, port); err != nil {
		return provision.Host{}, err
	}
	return p.inspectHost(ctx, c.ID)
}

// configureAndStart copies the agent config into the container and
// starts it.
func (p *Provider) configureAndStart(ctx context.Context, req provision.CreateRequest, s Settings, id string, port int) error {
	conf, err := agentConfig(req, s, port)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, h := range []*tar.Header{
		{Name: "etc/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: now},
		{Name: "etc/gpulayer/", Mode: 0o700, Typeflag: tar.TypeDir, ModTime: now},
		{Name: strings.TrimPrefix(ConfigPath, "/"), Mode: 0o600, Size: int64(len(conf)), Typeflag: tar.TypeReg, ModTime: now},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if _, err := tw.Write(conf); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := p.api.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf}); err != nil {
		return fmt.Errorf("docker provider: write the agent config into container %s: %w", id, err)
	}
	if _, err := p.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("docker provider: start container %s: %w", id, err)
	}
	return nil
}

// Terminate stops and removes the container hostID. A container that is
// gone already is not an error; one the provider did not make (or of
// another pool, when pool is set) is refused.
func (p *Provider) Terminate(ctx context.Context, pool, hostID string) error {
	if hostID == "" {
		return errors.New("docker provider: terminate: empty host ID")
	}
	ins, err := p.api.ContainerInspect(ctx, hostID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("docker provider: inspect %s: %w", hostID, err)
	}
	var labels map[string]string
	if ins.Container.Config != nil {
		labels = ins.Container.Config.Labels
	}
	if labels[LabelManaged] != "true" {
		return fmt.Errorf("docker provider: container %s is not one the provider made (no %s=true label); refusing to remove it", hostID, LabelManaged)
	}
	if pool != "" && labels[LabelPool] != pool {
		return fmt.Errorf("docker provider: container %s belongs to pool %q, not %q; refusing to remove it", hostID, labels[LabelPool], pool)
	}
	// The agent gets up to stopTimeout to exit, less when ctx would not
	// leave time to remove the container afterwards.
	grace := stopTimeout
	if dl, ok := ctx.Deadline(); ok {
		grace = min(grace, time.Until(dl)/2)
	}
	timeout := max(int(grace/time.Second), 0)
	if _, err := p.api.ContainerStop(ctx, ins.Container.ID, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
		p.logger.Warn("stop before remove failed; removing by force", "container_id", ins.Container.ID, "error", err)
	}
	if _, err := p.api.ContainerRemove(ctx, ins.Container.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker provider: remove %s: %w", ins.Container.ID, err)
	}
	p.logger.Info("host terminated", "container_id", ins.Container.ID, "node_name", labels[LabelNodeName])
	return nil
}

// List returns the provider's containers of pool (every pool when pool is
// empty), running or not, sorted by node name.
func (p *Provider) List(ctx context.Context, pool string) ([]provision.Host, error) {
	f := make(client.Filters).Add("label", LabelManaged+"=true")
	if pool != "" {
		f.Add("label", LabelPool+"="+pool)
	}
	res, err := p.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker provider: list containers: %w", err)
	}
	hosts := make([]provision.Host, 0, len(res.Items))
	for i := range res.Items {
		hosts = append(hosts, hostOf(&res.Items[i]))
	}
	sort.Slice(hosts, func(i, j int) bool {
		return hosts[i].NodeName < hosts[j].NodeName || hosts[i].NodeName == hosts[j].NodeName && hosts[i].ID < hosts[j].ID
	})
	return hosts, nil
}

// findByKey returns the container of pool and key, nil when there is
// none.
func (p *Provider) findByKey(ctx context.Context, pool, key string) (provision.Host, *container.Summary, error) {
	f := make(client.Filters).Add("label", LabelManaged+"=true", LabelPool+"="+pool, LabelIdempotencyKey+"="+key)
	res, err := p.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return provision.Host{}, nil, fmt.Errorf("docker provider: list containers: %w", err)
	}
	for i := range res.Items {
		c := &res.Items[i]
		// The engine matches "k=v" label filters exactly; check anyway.
		if c.Labels[LabelPool] == pool && c.Labels[LabelIdempotencyKey] == key {
			return hostOf(c), c, nil
		}
	}
	return provision.Host{}, nil, nil
}

func (p *Provider) inspectHost(ctx context.Context, id string) (provision.Host, error) {
	ins, err := p.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return provision.Host{}, fmt.Errorf("docker provider: inspect %s: %w", id, err)
	}
	c := ins.Container
	h := provision.Host{ID: c.ID}
	if c.Config != nil {
		h.Pool, h.IdempotencyKey, h.NodeName = c.Config.Labels[LabelPool], c.Config.Labels[LabelIdempotencyKey], c.Config.Labels[LabelNodeName]
	}
	if c.State != nil {
		h.State = string(c.State.Status)
	}
	return h, nil
}

func hostOf(c *container.Summary) provision.Host {
	return provision.Host{
		ID: c.ID, Pool: c.Labels[LabelPool], IdempotencyKey: c.Labels[LabelIdempotencyKey],
		NodeName: c.Labels[LabelNodeName], State: string(c.State),
	}
}
