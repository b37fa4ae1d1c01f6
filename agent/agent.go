// Package agent is the gpulayer process: it reads the agent configuration,
// starts the server and/or client roles and the HTTP API, and shuts them
// down in order. In dev mode (-dev) both roles run in one process, bound to
// loopback, and the client reaches the server in-process.
package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gpulayer/gpulayer/agent/client"
	"github.com/gpulayer/gpulayer/agent/client/devices"
	agenthttp "github.com/gpulayer/gpulayer/agent/http"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// Version is the agent's version, reported by /v1/agent/self.
var Version = "0.1.0"

// Agent is one running gpulayer process.
type Agent struct {
	config *Config
	logger hclog.Logger

	server *server.Server
	client *client.Client

	httpServer *http.Server
	// cancelRequests cancels the context of every request in flight
	// (http.Server.BaseContext): blocking queries and followed logs end,
	// so a graceful shutdown does not wait out their wait.
	cancelRequests context.CancelFunc
	listener       net.Listener

	shutdownOnce sync.Once
	shutdownErr  error
}

// New starts an agent from a merged, validated configuration: the server
// (when enabled) first, then the HTTP API, then the client, which registers
// its node with the server. On error everything already started is shut
// down again. Errors wrap ErrConfig for bad configuration.
func New(cfg *Config, logger hclog.Logger) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "gpulayer"
		}
		cfg.Name = host
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: data_dir: %v", ErrConfig, err)
	}
	if err := openForTaskUsers(cfg); err != nil {
		return nil, err
	}
	a := &Agent{config: cfg, logger: logger}
	if err := a.start(); err != nil {
		_ = a.Shutdown()
		return nil, err
	}
	return a, nil
}

// clientRegisterWait is how long a client-only agent's start waits for
// the first registration before it goes on without (client.NewClient).
const clientRegisterWait = 5 * time.Second

func (a *Agent) start() error {
	cfg := a.config
	// Take the HTTP port first, so a port already in use fails start-up
	// before Raft has touched the data dir.
	tb, err := cfg.loadTLS()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr())
	if err != nil {
		return fmt.Errorf("http: listen on %s: %w", cfg.HTTPAddr(), err)
	}
	a.listener = ln
	lim := cfg.HTTPLimits()
	// Count connections per client below TLS: a refused one is closed
	// without a plain-HTTP 429 when the listener speaks TLS.
	plainHTTP := tb == nil || !tb.Config().HTTP
	ln = agenthttp.LimitConnsPerClient(ln, lim.MaxConnsPerClient, plainHTTP)
	ln = a.wrapTLS(ln, tb) // config_tls.go: HTTPS only with tls.http

	if cfg.Server.Enabled {
		scfg := &server.Config{
			DataDir:         filepath.Join(cfg.DataDir, "server"),
			NodeName:        cfg.Name,
			RaftBindAddr:    cfg.RaftAddr(),
			BootstrapExpect: cfg.Server.BootstrapExpect,
			NumSchedulers:   cfg.Server.NumSchedulers,
			RaftMultiplier:  cfg.Server.RaftMultiplier,
			DevMode:         cfg.DevMode,
			Datacenter:      cfg.Datacenter,
			HTTPAddr:        cfg.HTTPAdvertiseAddr(cfg.HTTPAddr()),
			Logger:          a.logger.Named("server"),
			GC:              cfg.Server.gcConfig(),
			// Provisioning: new hosts join this server's advertised HTTP
			// address and the live servers gossip knows.
			Provision: server.ProvisionConfig{Disabled: cfg.Server.DisableProvisioning, JoinToken: cfg.Server.ProvisionJoinToken, Region: cfg.Region,
				ExecCommands:   slices.Clone(cfg.Server.ProvisionExecCommands),
				DockerImages:   slices.Clone(cfg.Server.ProvisionDockerImages),
				DockerBinaries: slices.Clone(cfg.Server.ProvisionDockerBinaries),
				ExecPassEnv:    slices.Clone(cfg.Server.ProvisionExecPassEnv)},
		}
		if !cfg.DevMode {
			// Servers find each other over gossip; a dev agent is alone.
			scfg.SerfBindAddr = cfg.SerfAddr()
			scfg.RetryJoin = cfg.RetryJoinAddrs()
			scfg.EncryptKey = cfg.GossipKey()
			scfg.AllowUnauthenticatedGossip = cfg.Server.AllowUnauthenticatedGossip
		}
		scfg.RaftTLS = a.raftTLS(tb)
		// The blob sync pulls with this server's certificate (tls.http).
		scfg.ArtifactPeerTLS = serverHTTPTLS(tb)
		srv, err := server.NewServer(scfg)
		if err != nil {
			return fmt.Errorf("start server: %w", err)
		}
		a.server = srv
		if cfg.Server.BootstrapExpect <= 1 {
			// A multi-server cluster elects a leader only once enough
			// servers have joined; don't block start-up on it.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = srv.WaitForLeader(ctx)
			cancel()
			if err != nil {
				return fmt.Errorf("server: waiting for a Raft leader: %w", err)
			}
		}
	}

	if cfg.Client.Enabled {
		var servers client.ServerConn
		var artConn client.ArtifactConn
		if a.server != nil {
			servers = a.server
			// Artifacts go through this agent's own HTTP API, the routes
			// a remote client uses (see client.Config.ArtifactConn).
			own, err := client.NewHTTPServerConn(client.HTTPServerConnConfig{
				Servers: []string{loopbackAddr(ln.Addr().String())},
				Logger:  a.logger.Named("client").Named("artifacts"),
				TLS:     serverHTTPTLS(tb),
			})
			if err != nil {
				return fmt.Errorf("client: artifact connection to %s: %w", ln.Addr(), err)
			}
			artConn = own
		} else {
			conn, err := client.NewHTTPServerConn(client.HTTPServerConnConfig{
				Servers:       cfg.Client.Servers,
				Logger:        a.logger.Named("client").Named("servers"),
				TLS:           serverHTTPTLS(tb),
				RegisterToken: cfg.ACLToken(),
			})
			if err != nil {
				return fmt.Errorf("%w: client.servers: %v", ErrConfig, err)
			}
			servers = conn
		}
		devGPUs := devGPUCount(cfg.Client)
		var simulated []*structs.DeviceGroup
		if cfg.Client.DevGPUs != nil {
			// Outside dev mode simulated GPUs are only added when asked
			// for explicitly (test clusters on hosts without GPUs).
			if !cfg.DevMode && devGPUs > 0 {
				a.logger.Warn("adding simulated NVIDIA GPUs (simulated = true)", "count", devGPUs)
				// Instance IDs are stable for this agent's name and data
				// dir, and differ between agents.
				seed := sha256.Sum256([]byte(cfg.Name + "\x00" + cfg.DataDir))
				simulated = append(simulated, devices.Simulated(hex.EncodeToString(seed[:]), devGPUs))
			}
		}
		if len(cfg.Client.SimulatedGPUs) > 0 {
			seed := sha256.Sum256([]byte(cfg.Name + "\x00" + cfg.DataDir + "\x00declared"))
			simulated = append(simulated, simulatedGroups(hex.EncodeToString(seed[:]), cfg.Client.SimulatedGPUs)...)
		}
		outMaxFiles, outMaxBytes := cfg.Client.outputLimits()
		// A client-only agent waits briefly for its servers: when none
		// answers (a control-plane outage) it starts anyway, serving its
		// allocations from local state, and registers in the background.
		var regWait time.Duration
		if a.server == nil {
			regWait = clientRegisterWait
		}
		cl, err := client.NewClient(&client.Config{
			RegisterTimeout:  regWait,
			DataDir:          filepath.Join(cfg.DataDir, "client"),
			NodeName:         cfg.Name,
			Datacenter:       cfg.Datacenter,
			NodeClass:        cfg.Client.NodeClass,
			NodePool:         cfg.Client.NodePool,
			HTTPAddr:         cfg.HTTPAdvertiseAddr(ln.Addr().String()),
			Meta:             cfg.Client.Meta,
			DevMode:          cfg.DevMode,
			DevGPUs:          devGPUs,
			SimulatedDevices: simulated,
			MemoryModel:      cfg.Client.MemoryModel,
			Availability:     cfg.Client.Availability,
			Reserved:         cfg.Client.Reserved,
			Servers:          servers,
			Logger:           a.logger.Named("client"),
			LogMaxFiles:      cfg.Client.LogMaxFiles,
			LogMaxFileSizeMB: cfg.Client.LogMaxFileSizeMB,
			NativeUsers:      cfg.Client.nativeUsers(),
			Docker:           cfg.Client.dockerAllowances(),
			ArtifactConn:     artConn,
			OutputMaxFiles:   outMaxFiles,
			OutputMaxBytes:   outMaxBytes,
			MinDynamicPort:   cfg.Client.MinDynamicPort,
			MaxDynamicPort:   cfg.Client.MaxDynamicPort,
			ReservedPorts:    cfg.clientReservedPorts(),
		})
		if err != nil {
			return fmt.Errorf("start client: %w", err)
		}
		a.client = cl
	}

	hcfg := agenthttp.Config{
		Logger: a.logger,
		Self:   a.self,
		// -dev has no accounts: only this machine and its own UI may
		// drive it (no DNS rebinding, no cross-site requests).
		LocalOnly:        cfg.DevMode,
		MaxSnapshotBytes: cfg.HTTPLimits().MaxSnapshotBytes,
		MaxArtifactBytes: cfg.HTTPLimits().MaxArtifactBytes,
		ServerPeerName:   serverPeerName(tb),
		ServerTLS:        serverHTTPTLS(tb),
		NodeTLS:          nodeHTTPTLS(tb),
		ACLEnabled:       cfg.ACLEnabled(),
		Region:           cfg.Region,
	}
	if hcfg.ACLEnabled && a.server == nil {
		// A client-only agent has no state: it asks its servers.
		res, err := agenthttp.NewRemoteResolver(agenthttp.RemoteResolverConfig{Servers: cfg.Client.Servers, TLS: serverHTTPTLS(tb)})
		if err != nil {
			return fmt.Errorf("%w: client.servers: %v", ErrConfig, err)
		}
		hcfg.Resolver = res
	}
	if a.server == nil && cfg.Client.Enabled && cfg.ACLToken() == "" {
		a.logger.Warn("no acl token: servers with ACLs on (the default) refuse to register this node; " +
			"set acl { token = \"...\" } or -acl-token to a token that may write nodes (website/docs/acl.md)")
	}
	for _, w := range cfg.devIgnored() {
		a.logger.Warn(w)
	}
	if !cfg.DevMode && !hcfg.ACLEnabled {
		a.logger.Warn("ACLS ARE DISABLED (acl { enabled = false }): every caller that reaches this agent's HTTP API may run jobs, exec into tasks and change the cluster; do not run this way on a network")
	}
	if a.server != nil {
		hcfg.Server = a.server
	}
	if a.client != nil {
		hcfg.Client = a.client
	}
	// Blocking queries on a node's allocations wait without holding
	// their connection's goroutine and buffers (agent/http/park.go).
	parker := agenthttp.NewParker(ln, a.logger.Named("http"))
	ln = parker
	hcfg.Parker = parker
	handler, err := agenthttp.New(hcfg)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	a.httpServer = newHTTPServer(handler, lim, a.logger.Named("http"))
	parker.SetHandler(a.httpServer.Handler)
	a.httpServer.ConnState = parker.ConnState
	// Requests share a context that shutdown cancels after a short grace:
	// http.Server.Shutdown waits for active connections, and a client
	// agent's blocking query on its allocations (or anyone's) may wait
	// minutes, so a server with a connected client failed its 5 s
	// shutdown whenever the client had not closed first.
	baseCtx, cancelRequests := context.WithCancel(context.Background())
	a.cancelRequests = cancelRequests
	a.httpServer.BaseContext = func(net.Listener) context.Context { return baseCtx }
	a.httpServer.RegisterOnShutdown(func() { time.AfterFunc(shutdownGrace, cancelRequests) })
	go func() {
		if err := a.httpServer.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.logger.Error("http server stopped", "error", err)
		}
	}()
	a.logger.Info("agent started", "http_addr", ln.Addr().String(), "data_dir", cfg.DataDir,
		"server", cfg.Server.Enabled, "client", cfg.Client.Enabled, "dev", cfg.DevMode)
	return nil
}

// FatalCh returns a channel that receives an error when the agent's server
// can no longer serve (its state machine halted on a corrupt log entry); the
// command stops the agent with that one message. Nil without a server.
func (a *Agent) FatalCh() <-chan error {
	if a.server == nil {
		return nil
	}
	return a.server.FatalCh()
}

// HTTPAddr returns the address the HTTP API listens on ("127.0.0.1:4656").
func (a *Agent) HTTPAddr() string {
	if a.listener == nil {
		return ""
	}
	return a.listener.Addr().String()
}

// shutdownGrace is how long requests in flight may go on once Shutdown
// has begun before their context is canceled: short ones finish, long
// polls end.
const shutdownGrace = time.Second

// Shutdown stops the HTTP API, then the client (its tasks are stopped, not
// reported as failed), then the server. It is safe to call more than once.
func (a *Agent) Shutdown() error {
	a.shutdownOnce.Do(func() {
		var errs []error
		if a.httpServer != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := a.httpServer.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http: %w", err))
			}
			cancel()
			a.cancelRequests()
		} else if a.listener != nil {
			_ = a.listener.Close()
		}
		if a.client != nil {
			if err := a.client.Shutdown(); err != nil {
				errs = append(errs, fmt.Errorf("client: %w", err))
			}
		}
		if a.server != nil {
			if err := a.server.Shutdown(); err != nil {
				errs = append(errs, fmt.Errorf("server: %w", err))
			}
		}
		a.shutdownErr = errors.Join(errs...)
	})
	return a.shutdownErr
}

// self describes the agent for GET /v1/agent/self.
func (a *Agent) self() map[string]interface{} {
	cfg := a.config
	out := map[string]interface{}{
		"Version":    Version,
		"GoVersion":  runtime.Version(),
		"Name":       cfg.Name,
		"Datacenter": cfg.Datacenter,
		"DataDir":    cfg.DataDir,
		"DevMode":    cfg.DevMode,
		"Server":     cfg.Server.Enabled,
		"Client":     cfg.Client.Enabled,
		"HTTPAddr":   a.HTTPAddr(),
		"LogLevel":   strings.ToUpper(cfg.LogLevel),
	}
	if a.server != nil {
		out["Leader"] = a.server.Leader()
		out["Stats"] = a.server.Stats()
	}
	if a.client != nil {
		if n := a.client.Node(); n != nil {
			out["NodeID"] = n.ID
		}
	}
	return out
}
