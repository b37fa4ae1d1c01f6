package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/agent/tlsutil"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Default ports. They differ from Nomad's (4646-4648) so both can run on one
// host.
const (
	DefaultHTTPPort = 4656
	DefaultRaftPort = 4657
	DefaultSerfPort = 4658
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("agent config")

// Config is the agent's configuration: an HCL file (-config) merged with
// command-line flags, flags winning. The zero value is not usable; start
// from DefaultConfig or DevConfig.
type Config struct {
	// DataDir holds server/ (Raft log and snapshots) and client/ (allocation
	// directories and the node ID). Default: $GPULAYER_HOME, else
	// ~/.gpulayer. Created with mode 0700.
	DataDir string `hcl:"data_dir,optional"`
	// Name is this agent's node and server name. Default: the hostname.
	Name string `hcl:"name,optional"`
	// Datacenter of the client node. Default "dc1".
	Datacenter string `hcl:"datacenter,optional"`
	// BindAddr is the address every listener binds. Default "0.0.0.0",
	// "127.0.0.1" in dev mode.
	BindAddr string `hcl:"bind_addr,optional"`
	// LogLevel is TRACE, DEBUG, INFO, WARN or ERROR. Default INFO.
	LogLevel string `hcl:"log_level,optional"`
	// Region names the certificates peers must present
	// ("server.<region>.gpulayer"). Default "global".
	Region string `hcl:"region,optional"`

	// Addresses overrides BindAddr for single listeners.
	Addresses *Addresses `hcl:"addresses,block"`

	Ports  *Ports        `hcl:"ports,block"`
	Server *ServerConfig `hcl:"server,block"`
	Client *ClientConfig `hcl:"client,block"`
	// TLS is the tls block (config_tls.go): HTTPS and Raft over mutual
	// TLS. Nil or all false means plain TCP.
	TLS *tlsutil.Config `hcl:"tls,block"`

	// Limits bounds the HTTP API's connections and request reads
	// (config_limits.go).
	Limits *LimitsConfig `hcl:"limits,block"`
	// ACL is the acl block (config_acl.go): on by default outside dev mode.
	ACL *ACLConfig `hcl:"acl,block"`

	// DevMode runs server and client in one process bound to loopback.
	DevMode bool
}

// Addresses are per-listener bind addresses; empty fields use BindAddr.
type Addresses struct {
	// HTTP is the address the HTTP API listens on, e.g. "0.0.0.0" to serve
	// every interface while Raft and gossip stay on BindAddr. Other agents
	// are told to reach the API at BindAddr when HTTP is unspecified.
	HTTP string `hcl:"http,optional"`
}

// Ports are the agent's listening ports.
type Ports struct {
	HTTP int `hcl:"http,optional"`
	Raft int `hcl:"raft,optional"`
	Serf int `hcl:"serf,optional"`
}

// ServerConfig enables and tunes the server role.
type ServerConfig struct {
	Enabled bool `hcl:"enabled,optional"`
	// BootstrapExpect is how many servers to wait for before bootstrapping
	// Raft. 1 (the default) runs a single server.
	BootstrapExpect int `hcl:"bootstrap_expect,optional"`
	// NumSchedulers is how many scheduler workers run. Default 2.
	NumSchedulers int `hcl:"num_schedulers,optional"`
	// RaftMultiplier scales Raft's heartbeat (400 ms), election (400 ms)
	// and leader lease (400 ms) timeouts, as Nomad's raft_multiplier
	// does: 1 (the default) for servers on one LAN, up to 10 for a WAN or
	// for hosts so loaded that leaders change without a failure
	// (server.RaftTimings).
	RaftMultiplier int `hcl:"raft_multiplier,optional"`
	// RetryJoin lists gossip addresses of other servers ("host" or
	// "host:port"; the port defaults to 4658) to join at start, retried
	// until one answers.
	RetryJoin []string `hcl:"retry_join,optional"`
	// Encrypt is the gossip encryption key: base64 of 16, 24 or 32 bytes
	// (AES-128, -192 or -256), as `gpulayer operator gossip keygen`
	// prints. Every server must use the same key. Empty means no
	// encryption.
	Encrypt string `hcl:"encrypt,optional"`
	// AllowUnauthenticatedGossip lets a server whose gossip has neither a
	// key (encrypt) nor Raft over TLS (tls { rpc = true }) join other
	// servers and add gossip members as Raft voters. Anyone who reaches
	// the gossip port then becomes a voter with a copy of every secret;
	// for trusted lab networks only, warned about at every start. False
	// (the default) refuses bootstrap_expect > 1, retry_join and
	// PUT /v1/agent/join without a key or tls.rpc.
	AllowUnauthenticatedGossip bool `hcl:"allow_unauthenticated_gossip,optional"`
	// The garbage collector's settings (config_gc.go), durations such as
	// "4h" named as in Nomad. Empty means the server's default (see
	// server.GCConfig).
	JobGCInterval        string `hcl:"job_gc_interval,optional"`
	EvalGCThreshold      string `hcl:"eval_gc_threshold,optional"`
	BatchEvalGCThreshold string `hcl:"batch_eval_gc_threshold,optional"`
	JobGCThreshold       string `hcl:"job_gc_threshold,optional"`
	NodeGCThreshold      string `hcl:"node_gc_threshold,optional"`
	// ArtifactGCThreshold is how long an artifact no job or allocation
	// references is kept (default 24h).
	ArtifactGCThreshold string `hcl:"artifact_gc_threshold,optional"`
	// Provisioning (server/provision): ProvisionJoinToken is the ACL
	// token the clients of provisioned hosts register with (empty with
	// ACLs off); DisableProvisioning turns the leader's provisioner off.
	ProvisionJoinToken  string `hcl:"provision_join_token,optional"`
	DisableProvisioning bool   `hcl:"disable_provisioning,optional"`
	// ProvisionExecCommands are the programs (absolute paths) the exec
	// provider may run; ProvisionDockerImages and ProvisionDockerBinaries
	// the images and gpulayer binaries a docker pool may name. A pool
	// written through the API can only pick one of these: what a server
	// runs is decided here, never by an API caller
	// (config_provision.go).
	ProvisionExecCommands   []string `hcl:"provision_exec_commands,optional"`
	ProvisionDockerImages   []string `hcl:"provision_docker_images,optional"`
	ProvisionDockerBinaries []string `hcl:"provision_docker_binaries,optional"`
	// ProvisionExecPassEnv are the names of this server's environment
	// variables an exec pool's pass_env may name: which of the server's
	// variables (cloud credentials, say) a provider program sees is the
	// server operator's decision too. Empty: a pool may pass none.
	ProvisionExecPassEnv []string `hcl:"provision_exec_pass_env,optional"`
}

// ClientConfig enables and tunes the client role.
type ClientConfig struct {
	Enabled bool `hcl:"enabled,optional"`
	// Servers are the HTTP API addresses ("host:port" or http URLs) of the
	// servers a client without a local server talks to; the client moves
	// to the next one when one fails. Required for a client-only agent.
	Servers   []string          `hcl:"servers,optional"`
	NodeClass string            `hcl:"node_class,optional"`
	Meta      map[string]string `hcl:"meta,optional"`
	// NodePool is the node pool the node joins (Nomad's client
	// node_pool): empty means "default"; a pool that does not exist is
	// created when the node registers; "all" cannot have nodes.
	NodePool string `hcl:"node_pool,optional"`
	// DevGPUs is how many simulated NVIDIA GPUs a dev-mode client adds when
	// it finds no real GPU. Nil means 2; 0 turns simulated GPUs off.
	DevGPUs *int `hcl:"dev_gpus,optional"`
	// LogMaxFiles and LogMaxFileSizeMB bound each task's rotated logs.
	// Defaults 10 files of 10 MiB.
	LogMaxFiles      int `hcl:"log_max_files,optional"`
	LogMaxFileSizeMB int `hcl:"log_max_file_size_mb,optional"`
	// Availability is the node's class: "continuous" (default) or
	// "opportunistic" (takes only work that opts in).
	Availability string `hcl:"availability,optional"`
	// Reserved lists capabilities the node is kept for, such as "voice":
	// it takes only work that requires one of them.
	Reserved []string `hcl:"reserved,optional"`
	// MemoryModel overrides the detected memory model: "discrete" or
	// "unified".
	MemoryModel string `hcl:"memory_model,optional"`
	// SimulatedGPUs declares simulated GPUs (see SimulatedGPUConfig).
	SimulatedGPUs []*SimulatedGPUConfig `hcl:"simulated_gpu,block"`
	// Native and Docker say what tasks may ask of the host
	// (config_tasks.go); nil means the defaults, which allow nothing.
	Native *NativeConfig `hcl:"native,block"`
	Docker *DockerConfig `hcl:"docker,block"`
	// Outputs bounds each task's uploaded outputs (config_outputs.go).
	Outputs *OutputsConfig `hcl:"outputs,block"`
	// MinDynamicPort and MaxDynamicPort bound the host ports given to
	// dynamic ports (config_ports.go); 0 means 20000 and 32000.
	MinDynamicPort int `hcl:"min_dynamic_port,optional"`
	MaxDynamicPort int `hcl:"max_dynamic_port,optional"`
	// ReservedPorts lists host ports kept from allocations,
	// "22,80,8000-8080" (Nomad's reserved { reserved_ports }; here an
	// attribute of client, as reserved names capabilities).
	ReservedPorts string `hcl:"reserved_ports,optional"`
}

// DefaultConfig returns the defaults for a production agent (neither role
// enabled until a flag or the file enables one).
func DefaultConfig() *Config {
	return &Config{
		DataDir:    defaultDataDir(),
		Datacenter: "dc1",
		BindAddr:   "0.0.0.0",
		LogLevel:   "INFO",
		Addresses:  &Addresses{},
		Ports:      &Ports{HTTP: DefaultHTTPPort, Raft: DefaultRaftPort, Serf: DefaultSerfPort},
		Server:     &ServerConfig{BootstrapExpect: 1, NumSchedulers: 2},
		Client:     &ClientConfig{LogMaxFiles: 10, LogMaxFileSizeMB: 10},
	}
}

// DevConfig returns the dev-mode defaults: server and client in one
// process, loopback only, state under the default data dir so a restart
// keeps it.
func DevConfig() *Config {
	c := DefaultConfig()
	c.DevMode = true
	c.BindAddr = "127.0.0.1"
	c.Server.Enabled = true
	c.Client.Enabled = true
	return c
}

func defaultDataDir() string {
	if d := os.Getenv("GPULAYER_HOME"); d != "" {
		return d
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".gpulayer")
	}
	return ".gpulayer"
}

// LoadConfigFile parses an agent config file written in HCL. Errors name
// the file, line and column and wrap ErrConfig.
func LoadConfigFile(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return ParseConfig(path, src)
}

// ParseConfig parses agent config HCL from src; filename is used in errors.
//
// Before parsing, src is checked for nesting deeper than
// jobspec.MaxNestingDepth (the agent config obeys the jobspec's limits).
func ParseConfig(filename string, src []byte) (*Config, error) {
	if diags := jobspec.CheckNesting(filename, src); diags.HasErrors() {
		return nil, diagError(diags)
	}
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	var c Config
	var ctx *hcl.EvalContext
	if body, ok := f.Body.(*hclsyntax.Body); ok {
		ctx = jobspec.ChargedContext(body)
	}
	if diags := gohcl.DecodeBody(f.Body, ctx, &c); diags.HasErrors() {
		return nil, diagError(diags)
	}
	return &c, nil
}

func diagError(diags hcl.Diagnostics) error {
	var lines []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		if d.Subject != nil {
			msg = fmt.Sprintf("%s:%d:%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, msg)
		}
		lines = append(lines, msg)
	}
	return fmt.Errorf("%w: %s", ErrConfig, strings.Join(lines, "\n"))
}

// Merge overlays the set fields of o onto c.
func (c *Config) Merge(o *Config) {
	if o == nil {
		return
	}
	if o.DataDir != "" {
		c.DataDir = o.DataDir
	}
	if o.Name != "" {
		c.Name = o.Name
	}
	if o.Datacenter != "" {
		c.Datacenter = o.Datacenter
	}
	if o.BindAddr != "" {
		c.BindAddr = o.BindAddr
	}
	if o.LogLevel != "" {
		c.LogLevel = o.LogLevel
	}
	if o.DevMode {
		c.DevMode = true
	}
	if o.Region != "" {
		c.Region = o.Region
	}
	c.mergeTLS(o.TLS)
	if ad := o.Addresses; ad != nil && ad.HTTP != "" {
		c.Addresses.HTTP = ad.HTTP
	}
	if p := o.Ports; p != nil {
		if p.HTTP != 0 {
			c.Ports.HTTP = p.HTTP
		}
		if p.Raft != 0 {
			c.Ports.Raft = p.Raft
		}
		if p.Serf != 0 {
			c.Ports.Serf = p.Serf
		}
	}
	c.mergeLimits(o.Limits)
	if s := o.Server; s != nil {
		c.Server.Enabled = c.Server.Enabled || s.Enabled
		if s.BootstrapExpect != 0 {
			c.Server.BootstrapExpect = s.BootstrapExpect
		}
		if s.NumSchedulers != 0 {
			c.Server.NumSchedulers = s.NumSchedulers
		}
		if s.RaftMultiplier != 0 {
			c.Server.RaftMultiplier = s.RaftMultiplier
		}
		if len(s.RetryJoin) > 0 {
			c.Server.RetryJoin = append([]string(nil), s.RetryJoin...)
		}
		if s.Encrypt != "" {
			c.Server.Encrypt = s.Encrypt
		}
		c.Server.AllowUnauthenticatedGossip = c.Server.AllowUnauthenticatedGossip || s.AllowUnauthenticatedGossip
		c.Server.mergeGC(s)
		// Provisioning.
		if s.ProvisionJoinToken != "" {
			c.Server.ProvisionJoinToken = s.ProvisionJoinToken
		}
		c.Server.DisableProvisioning = c.Server.DisableProvisioning || s.DisableProvisioning
		c.Server.mergeProvisionAllow(s)
	}
	c.mergeACL(o.ACL)
	if cl := o.Client; cl != nil {
		c.Client.Enabled = c.Client.Enabled || cl.Enabled
		if cl.NodeClass != "" {
			c.Client.NodeClass = cl.NodeClass
		}
		if cl.NodePool != "" {
			c.Client.NodePool = cl.NodePool
		}
		if len(cl.Servers) > 0 {
			c.Client.Servers = append([]string(nil), cl.Servers...)
		}
		if cl.Meta != nil {
			c.Client.Meta = cl.Meta
		}
		if cl.DevGPUs != nil {
			v := *cl.DevGPUs
			c.Client.DevGPUs = &v
		}
		if cl.LogMaxFiles != 0 {
			c.Client.LogMaxFiles = cl.LogMaxFiles
		}
		if cl.LogMaxFileSizeMB != 0 {
			c.Client.LogMaxFileSizeMB = cl.LogMaxFileSizeMB
		}
		if cl.Availability != "" {
			c.Client.Availability = cl.Availability
		}
		if cl.Reserved != nil {
			c.Client.Reserved = append([]string(nil), cl.Reserved...)
		}
		if cl.MemoryModel != "" {
			c.Client.MemoryModel = cl.MemoryModel
		}
		if cl.SimulatedGPUs != nil {
			c.Client.SimulatedGPUs = cl.SimulatedGPUs
		}
		if cl.Native != nil {
			c.Client.Native = cl.Native
		}
		if cl.Outputs != nil {
			c.Client.Outputs = cl.Outputs
		}
		if cl.Docker != nil {
			c.Client.Docker = cl.Docker
		}
		if cl.MinDynamicPort != 0 {
			c.Client.MinDynamicPort = cl.MinDynamicPort
		}
		if cl.MaxDynamicPort != 0 {
			c.Client.MaxDynamicPort = cl.MaxDynamicPort
		}
		if cl.ReservedPorts != "" {
			c.Client.ReservedPorts = cl.ReservedPorts
		}
	}
}

// Validate checks the merged configuration and names the bad field.
func (c *Config) Validate() error {
	var p []string
	if !c.Server.Enabled && !c.Client.Enabled {
		p = append(p, "neither server nor client is enabled: use -dev, -server or -client")
	}
	if c.DataDir == "" {
		p = append(p, "data_dir: must not be empty")
	}
	if net.ParseIP(c.BindAddr) == nil {
		p = append(p, fmt.Sprintf("bind_addr: %q is not an IP address", c.BindAddr))
	}
	for name, port := range map[string]int{"ports.http": c.Ports.HTTP, "ports.raft": c.Ports.Raft, "ports.serf": c.Ports.Serf} {
		if port < 0 || port > 65535 {
			p = append(p, fmt.Sprintf("%s: %d is not a port (0-65535)", name, port))
		}
	}
	if c.Server.BootstrapExpect < 1 {
		p = append(p, fmt.Sprintf("server.bootstrap_expect: must be at least 1, got %d", c.Server.BootstrapExpect))
	}
	p = append(p, c.validateCluster()...)
	p = append(p, c.validateTLS()...)
	p = append(p, c.validateACL()...)
	p = append(p, c.Server.validateGC()...)
	if n := len(c.Server.ProvisionJoinToken); n > maxACLTokenLen {
		p = append(p, fmt.Sprintf("server.provision_join_token: %d bytes, at most %d", n, maxACLTokenLen))
	}
	p = append(p, c.Server.validateProvisionAllow()...)
	p = append(p, c.Client.validateTasks()...)
	p = append(p, c.Client.validateOutputs()...)
	p = append(p, c.Client.validatePorts()...)
	p = append(p, c.validateLimits()...)
	if np := c.Client.NodePool; np != "" && (!structs.ValidNodePoolName(np) || np == structs.NodePoolAll) {
		p = append(p, fmt.Sprintf("client.node_pool %q: must be 1 to %d letters, digits, '-' or '_', and not %q (it cannot have nodes)",
			np, structs.MaxNodePoolNameLen, structs.NodePoolAll))
	}
	if c.Client.DevGPUs != nil && (*c.Client.DevGPUs < 0 || *c.Client.DevGPUs > 64) {
		p = append(p, fmt.Sprintf("client.dev_gpus: must be between 0 and 64, got %d", *c.Client.DevGPUs))
	}
	if err := structs.ValidateNodeClass(c.Client.MemoryModel, c.Client.Availability, c.Client.Reserved); err != nil {
		var ve *structs.ValidationError
		if errors.As(err, &ve) {
			for _, prob := range ve.Problems {
				p = append(p, "client."+prob)
			}
		}
	}
	for i, s := range c.Client.SimulatedGPUs {
		if s == nil {
			continue
		}
		p = append(p, s.validate(i+1)...)
	}
	switch strings.ToUpper(c.LogLevel) {
	case "TRACE", "DEBUG", "INFO", "WARN", "ERROR":
	default:
		p = append(p, fmt.Sprintf("log_level: unknown level %q", c.LogLevel))
	}
	if len(p) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(p, "; "))
	}
	return nil
}

// HTTPAddr returns "bind:port" for the HTTP API listener: addresses.http
// when set, else bind_addr.
func (c *Config) HTTPAddr() string {
	host := c.BindAddr
	if c.Addresses != nil && c.Addresses.HTTP != "" {
		host = c.Addresses.HTTP
	}
	return net.JoinHostPort(host, strconv.Itoa(c.Ports.HTTP))
}

// HTTPAdvertiseAddr returns the "host:port" other agents reach the HTTP
// API at: the listener's address, or bind_addr with the listener's port
// when the listener binds every interface (0.0.0.0 or ::).
func (c *Config) HTTPAdvertiseAddr(listenAddr string) string {
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return listenAddr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort(c.BindAddr, port)
	}
	return listenAddr
}

// RaftAddr returns "bind:port" for Raft.
func (c *Config) RaftAddr() string {
	return net.JoinHostPort(c.BindAddr, strconv.Itoa(c.Ports.Raft))
}
