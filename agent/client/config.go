package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/client/artifacts"
	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/docker"
	"github.com/gpulayer/gpulayer/agent/driver/native"
	"github.com/gpulayer/gpulayer/structs"
)

// ServerConn is how the client reaches the servers. The in-process
// *server.Server implements it in dev mode; an HTTP implementation serves
// remote clients. The client cannot tell which it has.
type ServerConn interface {
	// NodeRegister creates or updates the node and returns the heartbeat
	// TTL the server expects.
	NodeRegister(ctx context.Context, node *structs.Node) (heartbeatTTL time.Duration, err error)
	// NodeUpdateStatus is the heartbeat. It returns an error wrapping
	// structs.ErrNotFound when the server does not know the node, and the
	// client then registers again.
	NodeUpdateStatus(ctx context.Context, nodeID, status string) (heartbeatTTL time.Duration, err error)
	// NodeAllocations is a blocking query for every allocation placed on
	// the node.
	NodeAllocations(ctx context.Context, nodeID string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error)
	// UpdateAllocs reports client-side status: each allocation carries ID,
	// NodeID, ClientStatus, ClientDescription and TaskStates only.
	UpdateAllocs(ctx context.Context, allocs []*structs.Allocation) error
}

// GPUHeartbeater is a ServerConn that can carry the node's latest GPU
// samples with the heartbeat (for node pools' GPU idleness rules, decided
// on the leader). The HTTP connection and the in-process server implement
// it; with a ServerConn that does not, heartbeats carry no samples.
type GPUHeartbeater interface {
	NodeHeartbeatGPUs(ctx context.Context, nodeID, status string, gpus []*structs.GPUUsage) (heartbeatTTL time.Duration, err error)
}

// Config configures a Client. Zero values get the defaults documented per
// field.
type Config struct {
	// ChecksHealth gives deployment health tracking the state of an
	// allocation's service checks (health_check = "checks"); nil means
	// the client's own check runner (services.go, Client.ChecksHealthy).
	ChecksHealth ChecksHealthProvider
	// DataDir is the client's own directory (mode 0700): node-id,
	// node-secret, state.db and allocs/<alloc-id>/<task>/{local,secrets,
	// logs,outputs}. Required.
	DataDir string
	// NodeName defaults to the host name.
	NodeName string
	// Datacenter defaults to "dc1".
	Datacenter string
	NodeClass  string
	// NodePool is the node pool the node registers in; empty means
	// "default".
	NodePool string
	// HTTPAddr is the agent's HTTP address, advertised for log proxying.
	HTTPAddr string
	Meta     map[string]string
	DevMode  bool
	// DevGPUs is how many simulated NVIDIA GPUs a dev-mode client adds when
	// it finds no real GPU: a negative value means the default of 2, and 0
	// disables them. Ignored outside dev mode.
	DevGPUs int
	// SimulatedDevices are added to the node's devices as declared (tests,
	// config files), whatever the mode.
	SimulatedDevices []*structs.DeviceGroup
	// MemoryModel overrides the detected memory model ("discrete" or
	// "unified"); empty means detect it from the devices.
	MemoryModel string
	// Availability is the node's availability class, "continuous" (the
	// default when empty) or "opportunistic".
	Availability string
	// Reserved lists capabilities the node is kept for, such as "voice".
	Reserved []string
	// Servers is required.
	Servers ServerConn
	// Logger defaults to a null logger.
	Logger hclog.Logger
	// Drivers default to DefaultDrivers: native and docker, built with
	// NativeUsers and Docker.
	Drivers []driver.Driver
	// NativeUsers says which users native tasks run as when the agent
	// runs as root; the zero value runs them as "nobody" and allows no
	// other user (native.UserPolicy).
	NativeUsers native.UserPolicy
	// Docker says what docker tasks may ask of the host beyond a plain
	// container; the zero value allows nothing (docker.Allowances).
	Docker docker.Allowances
	// LogMaxFiles is how many rotated files of each task stream are kept;
	// default 10.
	LogMaxFiles int
	// LogMaxFileSizeMB is the size in MiB at which a log file rotates;
	// default 10.
	LogMaxFileSizeMB int
	// RegisterTimeout bounds how long NewClient waits for the first
	// registration before it returns with the registration retrying in
	// the background (the client serves from local state meanwhile);
	// default 1 minute.
	RegisterTimeout time.Duration
	// SyncInterval is the first wait before resending allocation status
	// updates the servers refused; it doubles up to 2 seconds. Updates are
	// sent as soon as they happen, not on a tick (sync.go). Default 50
	// milliseconds.
	SyncInterval time.Duration
	// TelemetryInterval is how often the GPUs' utilisation and memory are
	// sampled (telemetry.go); default DefaultTelemetryInterval (5 s).
	TelemetryInterval time.Duration
	// DeviceHealthInterval is how often NVIDIA GPUs are probed through
	// NVML, and so how often an unhealthy one is re-probed (health.go);
	// default devices.DefaultHealthInterval (30 s).
	DeviceHealthInterval time.Duration

	// EndpointVerifyInterval is how often an endpoint router re-checks
	// each member's models listing (agent/client/endpoint); zero means
	// endpoint.DefaultVerifyInterval (5 s).
	EndpointVerifyInterval time.Duration
	// endpointRouters, when set (tests), makes the endpoint manager's
	// routers instead of agent/client/endpoint.
	endpointRouters func(routerConfig) (endpointRouter, error)

	// Artifacts is the artifact store inputs come from and outputs and
	// log archives go to; nil means Servers when it implements
	// ArtifactConn, else none (artifact:// inputs and outputs then fail
	// with a task event).
	Artifacts artifacts.Store
	// ArtifactConn, when Artifacts is nil, reaches the artifact store for
	// this node instead of Servers: an agent running the server in-process
	// gives an HTTPServerConn to its own HTTP API, so artifacts take the
	// same routes (verification, replication, access rules) as a remote
	// client's. The client gives it the node's secret (SetNodeSecret).
	ArtifactConn ArtifactConn
	// ArtifactHTTPClient fetches https artifact sources; nil means a
	// client with artifacts.DefaultHTTPSTimeout.
	ArtifactHTTPClient *http.Client
	// OutputMaxFiles and OutputMaxBytes bound one task's outputs (client
	// config `outputs { max_files max_bytes }`); zero means 1,000 files
	// and 512 MiB.
	OutputMaxFiles int
	OutputMaxBytes int64

	// NetworkAddress is the address this node's service instances
	// register with; empty means the host of HTTPAddr when it is a
	// specific IP, else 127.0.0.1.
	NetworkAddress string
	// MinDynamicPort and MaxDynamicPort bound the host ports given to
	// dynamic ports; zero means structs.DefaultMinDynamicPort (20000) and
	// structs.DefaultMaxDynamicPort (32000).
	MinDynamicPort int
	MaxDynamicPort int
	// ReservedPorts lists host ports no allocation is given,
	// "22,80,8000-8080" (structs.ParsePortRanges); checked by NewClient.
	ReservedPorts string

	// logMaxFileSizeBytes overrides LogMaxFileSizeMB in tests.
	logMaxFileSizeBytes int64
	// detectGPUs replaces NVML detection in tests.
	detectGPUs func() ([]*structs.DeviceGroup, error)
	// health replaces the NVML health source in tests and watches every
	// device instance of the node, simulated ones included (fault
	// injection with devices.SimulatedHealth).
	health devices.HealthSource
}

// newEndpointRouter returns the endpoint manager's router factory.
func (cfg *Config) newEndpointRouter() func(routerConfig) (endpointRouter, error) {
	if cfg.endpointRouters != nil {
		return cfg.endpointRouters
	}
	return newRouterFactory(cfg)
}

// networkAddress returns NetworkAddress with its default filled.
func (cfg *Config) networkAddress() string {
	if cfg.NetworkAddress != "" {
		return cfg.NetworkAddress
	}
	if host, _, err := net.SplitHostPort(cfg.HTTPAddr); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			return ip.String()
		}
	}
	return "127.0.0.1"
}

// Defaults used when Config fields are zero.
const (
	DefaultDatacenter       = "dc1"
	DefaultDevGPUs          = 2
	DefaultLogMaxFiles      = 10
	DefaultLogMaxFileSizeMB = 10
	DefaultRegisterTimeout  = time.Minute
	DefaultSyncInterval     = 50 * time.Millisecond
)

// DefaultDrivers returns the native driver and the docker driver with
// their default policies: native tasks run as "nobody" when the agent is
// root, docker tasks get no privilege beyond a plain container.
func DefaultDrivers(logger hclog.Logger) []driver.Driver {
	return PolicyDrivers(logger, native.UserPolicy{}, docker.Allowances{})
}

// PolicyDrivers returns the native driver with the user policy users and
// the docker driver with the allowances allow. The docker driver talks to
// DOCKER_HOST or the platform's default socket; on a host without Docker
// its fingerprint reports it not detected, so the node simply lacks it.
func PolicyDrivers(logger hclog.Logger, users native.UserPolicy, allow docker.Allowances) []driver.Driver {
	drivers := []driver.Driver{native.NewWithConfig(native.Config{Logger: logger, Users: users})}
	if d, err := docker.New(docker.Config{Logger: logger, Allow: allow}); err == nil {
		drivers = append(drivers, d)
	} else {
		logger.Warn("docker driver unavailable", "error", err)
	}
	return drivers
}

// withDefaults returns a copy of cfg with defaults filled, or an error
// wrapping structs.ErrInvalid.
func (cfg *Config) withDefaults() (*Config, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: client config is nil", structs.ErrInvalid)
	}
	c := *cfg
	if c.DataDir == "" {
		return nil, fmt.Errorf("%w: client config: DataDir is required", structs.ErrInvalid)
	}
	if c.Servers == nil {
		return nil, fmt.Errorf("%w: client config: Servers is required", structs.ErrInvalid)
	}
	if c.Datacenter == "" {
		c.Datacenter = DefaultDatacenter
	}
	if c.DevGPUs < 0 {
		c.DevGPUs = DefaultDevGPUs
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if len(c.Drivers) == 0 {
		c.Drivers = PolicyDrivers(c.Logger.Named("driver"), c.NativeUsers, c.Docker)
	}
	if c.LogMaxFiles <= 0 {
		c.LogMaxFiles = DefaultLogMaxFiles
	}
	if c.LogMaxFileSizeMB <= 0 {
		c.LogMaxFileSizeMB = DefaultLogMaxFileSizeMB
	}
	if c.logMaxFileSizeBytes <= 0 {
		c.logMaxFileSizeBytes = int64(c.LogMaxFileSizeMB) * 1024 * 1024
	}
	if c.RegisterTimeout <= 0 {
		c.RegisterTimeout = DefaultRegisterTimeout
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.TelemetryInterval <= 0 {
		c.TelemetryInterval = DefaultTelemetryInterval
	}
	if _, err := structs.ParsePortRanges(c.ReservedPorts); err != nil {
		return nil, fmt.Errorf("client config: ReservedPorts: %w", err)
	}
	if c.DeviceHealthInterval <= 0 {
		c.DeviceHealthInterval = devices.DefaultHealthInterval
	}
	return &c, nil
}
