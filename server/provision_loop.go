package server

import (
	"context"
	"fmt"
	"io"
	"maps"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/server/provision/docker"
	provexec "github.com/gpulayer/gpulayer/server/provision/exec"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// ProvisionConfig configures the leader's provisioner (server/provision):
// node pools with a scaling policy grow from blocked work and shrink when
// their nodes fall idle.
type ProvisionConfig struct {
	// Disabled turns the provisioner off (no pool is scaled).
	Disabled bool
	// Providers, when set, returns the provider of a pool (tests); nil
	// builds the docker or exec provider a pool's policy names, one per
	// pool, rebuilt when its provider config changes.
	Providers func(pool *structs.NodePool) (provision.Provider, error)
	// JoinServers are the HTTP addresses new hosts' clients join; empty
	// means this server's HTTPAddr and every live server gossip knows.
	JoinServers []string
	// JoinToken is the ACL token new hosts' clients register with (empty
	// with ACLs off).
	JoinToken string
	// Region is the region new hosts register in.
	Region string
	// ExecCommands are the programs the exec provider may run (clean
	// absolute paths, from the agent config's
	// server.provision_exec_commands): a pool's "command" must be one of
	// them, so an API caller can pick a program but never name one.
	// Empty: no pool may use the exec provider.
	ExecCommands []string
	// ExecPassEnv are the server environment variables an exec pool's
	// pass_env may name (server.provision_exec_pass_env); empty: none.
	ExecPassEnv []string
	// DockerImages and DockerBinaries are the values a docker pool's
	// "image" and "binary" may take (server.provision_docker_images,
	// server.provision_docker_binaries); empty: a pool may name none, and
	// gets the image built from the running executable.
	DockerImages, DockerBinaries []string
	// DeviceStats, when set, returns a node's latest GPU telemetry (for a
	// pool's GPU idle rule); nil: the GPU samples the nodes' heartbeats
	// brought to the leader (NodeHeartbeatGPUs).
	DeviceStats func(ctx context.Context, node *structs.Node) (*structs.NodeDeviceStats, error)
	// Interval, ReconcileInterval, CreateTimeout: see provision.Config;
	// zero means its defaults.
	Interval, ReconcileInterval, CreateTimeout time.Duration
}

// provisionLoop runs the provisioner while this server leads.
func (s *Server) provisionLoop(ctx context.Context) {
	pc := s.config.Provision
	if pc.Disabled {
		return
	}
	providers := pc.Providers
	var cache *providerCache
	if providers == nil {
		cache = &providerCache{server: s, byPool: map[string]*cachedProvider{}}
		providers = cache.get
		defer cache.closeAll()
	}
	deviceStats := pc.DeviceStats
	if deviceStats == nil {
		deviceStats = s.provisionDeviceStats
	}
	p, err := provision.New(provision.Config{
		Logger: s.logger,
		State:  s.fsm.State,
		Apply:  s.raftApply,
		Pools: func(st *state.StateStore) ([]*structs.NodePool, error) {
			return st.NodePools(nil)
		},
		Provider: providers,
		Join:     s.provisionJoin,
		Drain: func(ctx context.Context, nodeID string) error {
			_, err := s.NodeUpdateDrain(ctx, &NodeDrainRequest{NodeID: nodeID, Enable: true})
			return err
		},
		Deregister:        s.provisionDeregister,
		DeviceStats:       deviceStats,
		Interval:          pc.Interval,
		ReconcileInterval: pc.ReconcileInterval,
		CreateTimeout:     pc.CreateTimeout,
		Metrics:           s.provisionMetrics,
	})
	if err != nil {
		s.logger.Error("provisioner not started", "error", err)
		return
	}
	p.Run(ctx)
}

// provisionDeregister removes the node of a terminated host the normal
// way: marked down (its allocations lost, their jobs re-evaluated, its
// heartbeat timer stopped), then purged, only if it has not changed since
// (a host that came back and registered again keeps its node).
func (s *Server) provisionDeregister(ctx context.Context, nodeID string) error {
	if _, err := s.NodeUpdateStatus(ctx, nodeID, structs.NodeStatusDown); err != nil {
		return err
	}
	n, err := s.fsm.State().NodeByID(nil, nodeID)
	if err != nil || n == nil {
		return err
	}
	if n.Status != structs.NodeStatusDown {
		return fmt.Errorf("node %s: status %s after marking it down", nodeID, n.Status)
	}
	req := &structs.GCPurgeRequest{Nodes: []*structs.GCNodePurge{{NodeID: nodeID, ModifyIndex: n.ModifyIndex}}}
	_, _, err = s.raftApply(structs.GCPurgeRequestType, req)
	return err
}

// provisionJoin is what new hosts need to join this cluster.
func (s *Server) provisionJoin() provision.JoinInfo {
	pc := s.config.Provision
	servers := append([]string(nil), pc.JoinServers...)
	if len(servers) == 0 {
		if s.config.HTTPAddr != "" {
			servers = append(servers, s.config.HTTPAddr)
		}
		servers = append(servers, s.ArtifactPeers()...)
	}
	dc := s.config.Datacenter
	if dc == "" {
		dc = "dc1"
	}
	return provision.JoinInfo{Servers: servers, Token: pc.JoinToken, Region: pc.Region, Datacenter: dc}
}

// providerCache holds one provider per pool, rebuilt when the pool's
// provider or its config changes.
type providerCache struct {
	server *Server
	mu     sync.Mutex
	byPool map[string]*cachedProvider
}

type cachedProvider struct {
	name   string
	config map[string]string
	p      provision.Provider
}

func (c *providerCache) get(pool *structs.NodePool) (provision.Provider, error) {
	if pool.Scaling == nil {
		return nil, fmt.Errorf("%w: pool %q has no scaling policy", provision.ErrNoProvider, pool.Name)
	}
	sp := pool.Scaling
	// A pool written before the server's allow-lists changed, or through
	// a server with other lists, is checked again here, where it runs.
	if err := c.server.config.Provision.checkPoolProvider(pool); err != nil {
		return nil, fmt.Errorf("%w: %w", provision.ErrNoProvider, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cp := c.byPool[pool.Name]; cp != nil && cp.name == sp.Provider && maps.Equal(cp.config, sp.ProviderConfig) {
		return cp.p, nil
	}
	var p provision.Provider
	var err error
	logger := c.server.logger.With("pool", pool.Name)
	switch sp.Provider {
	case docker.Name:
		p, err = docker.FromPoolConfig(sp.ProviderConfig, logger)
	case provexec.Name:
		p, err = provexec.FromPoolConfig(sp.ProviderConfig, logger)
	default:
		return nil, fmt.Errorf("%w: %q (pool %q)", provision.ErrNoProvider, sp.Provider, pool.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", pool.Name, err)
	}
	if old := c.byPool[pool.Name]; old != nil {
		closeProvider(old.p)
	}
	c.byPool[pool.Name] = &cachedProvider{name: sp.Provider, config: maps.Clone(sp.ProviderConfig), p: p}
	return p, nil
}

// checkProviderConfig parses the provider config of pool's scaling policy
// as its provider will (docker: every key known and in bounds; exec: the
// command an executable file on this server), without making a provider.
// A pool without scaling passes; an unknown provider is Validate's to
// refuse.
func checkProviderConfig(pool *structs.NodePool) error {
	if pool.Scaling == nil {
		return nil
	}
	var err error
	switch pool.Scaling.Provider {
	case docker.Name:
		_, err = docker.ParseSettings(pool.Scaling.ProviderConfig)
	case provexec.Name:
		_, err = provexec.ParseConfig(pool.Scaling.ProviderConfig)
	}
	return err
}

func (c *providerCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, cp := range c.byPool {
		closeProvider(cp.p)
		delete(c.byPool, name)
	}
}

func closeProvider(p provision.Provider) {
	if cl, ok := p.(io.Closer); ok {
		_ = cl.Close()
	}
}

// NodePoolStatus returns what `node pool status` shows of pool name: its
// nodes (idle, busy, draining, down, joining), pending provision
// requests, the last decisions, failed provider calls and why blocked work
// gets no new hosts (provision.PoolWaiting), as a blocking query on the
// node pools, nodes, allocations, provision requests, evaluations and
// jobs tables. Errors wrap structs.ErrNotFound for an unknown pool.
func (s *Server) NodePoolStatus(ctx context.Context, name string, q *structs.QueryOptions) (*structs.NodePoolStatus, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		p, err := st.NodePoolByName(ws, name)
		if err != nil {
			return nil, 0, err
		}
		if p == nil {
			return nil, 0, fmt.Errorf("node pool %q: %w", name, structs.ErrNotFound)
		}
		// Watch the tables the status reads.
		if _, err := st.ProvisionRequestsByPool(ws, name); err != nil {
			return nil, 0, err
		}
		if _, err := st.NodesByNodePool(ws, name); err != nil {
			return nil, 0, err
		}
		out, err := provision.BuildPoolStatus(st, p)
		if err != nil {
			return nil, 0, err
		}
		// Why blocked work gets no hosts: it reads the evaluations and
		// their jobs, so the query wakes on those too.
		if _, err := st.Evals(ws); err != nil {
			return nil, 0, err
		}
		if out.Waiting, err = provision.PoolWaiting(st, p); err != nil {
			return nil, 0, err
		}
		idx, err := maxIndex(st, state.TableNodes, state.TableNodePools, state.TableProvisionRequests, state.TableAllocs, state.TableEvals, state.TableJobs)
		return out, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.(*structs.NodePoolStatus), meta, nil
}
