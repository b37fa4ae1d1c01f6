package server

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Raft storage and timing constants.
const (
	// raftLogCacheSize is the number of recent log entries kept in memory in
	// front of the BoltDB log store.
	raftLogCacheSize = 512
	// raftSnapshotsRetained is the number of snapshots kept on disk.
	raftSnapshotsRetained = 2
	// raftApplyTimeout bounds how long one apply waits to be enqueued.
	raftApplyTimeout = 30 * time.Second
	// raftTransportTimeout is the TCP transport's I/O timeout.
	raftTransportTimeout = 10 * time.Second
	// raftTransportPool is the number of pooled TCP connections per peer.
	raftTransportPool = 3
)

// setupRaft opens the Raft stores under <DataDir>/raft, creates the
// transport (unless the config supplies one) and starts Raft. A data dir
// without Raft state bootstraps a single-voter configuration with this
// server; one with state resumes from it.
func (s *Server) setupRaft() error {
	cfg := s.config
	raftDir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(filepath.Join(raftDir, "snapshots"), 0o700); err != nil {
		return fmt.Errorf("raft: create data dir: %w", err)
	}
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("raft: data dir mode: %w", err)
	}

	rlog := s.logger.Named("raft")
	trans := cfg.Transport
	if trans == nil {
		var adv net.Addr
		if cfg.RaftAdvertiseAddr != "" {
			a, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertiseAddr)
			if err != nil {
				return fmt.Errorf("raft: %w: advertise address %q: %v", structs.ErrInvalid, cfg.RaftAdvertiseAddr, err)
			}
			adv = a
		}
		var allow func(net.IP) bool
		if cfg.RaftTLS == nil && !cfg.DevMode {
			// Without TLS any process that can reach the port could
			// append to the log: accept known servers' addresses only,
			// and say loudly that this is no authentication.
			allow = s.raftPeerAllowed
			s.logger.Warn("raft is not authenticated: without tls.rpc any process on a known server's address can append to the log; " +
				"run servers with tls { rpc = true } (see website/docs/tls.md)")
		}
		stream, err := newRaftStreamLayer(cfg.RaftBindAddr, adv, cfg.RaftTLS, allow, rlog)
		if err != nil {
			return fmt.Errorf("raft: listen on %s: %w", cfg.RaftBindAddr, err)
		}
		trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  stream,
			MaxPool: raftTransportPool,
			Timeout: raftTransportTimeout,
			Logger:  rlog,
		})
	} else if cfg.RaftTLS != nil {
		return fmt.Errorf("raft: %w: %w", structs.ErrInvalid, errRaftTLSInMemory)
	}
	if ct := newCommitTracker(trans); ct != nil {
		s.commits = ct
		trans = ct
	}
	s.raftTransport = trans

	dbPath := filepath.Join(raftDir, "raft.db")
	if err := checkRaftStore(dbPath); err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	store, err := openRaftStore(dbPath)
	if err != nil {
		return fmt.Errorf("raft: open log store: %w", err)
	}
	s.raftStore = store
	logs, err := raft.NewLogCache(raftLogCacheSize, store)
	if err != nil {
		return fmt.Errorf("raft: log cache: %w", err)
	}
	s.raftLogs = logs
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, raftSnapshotsRetained, rlog)
	if err != nil {
		return fmt.Errorf("raft: snapshot store: %w", err)
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeName)
	rc.Logger = rlog
	rc.NotifyCh = s.leaderCh
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = RaftTimings(cfg.RaftMultiplier)
	if cfg.DevMode {
		// One voter: elections need no peers, so short timeouts give a
		// leader in well under a second.
		rc.HeartbeatTimeout = 200 * time.Millisecond
		rc.ElectionTimeout = 200 * time.Millisecond
		rc.LeaderLeaseTimeout = 100 * time.Millisecond
		rc.CommitTimeout = 5 * time.Millisecond
	}
	if cfg.RaftSnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.RaftSnapshotThreshold
		rc.TrailingLogs = cfg.RaftSnapshotThreshold
	}
	if cfg.RaftSnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.RaftSnapshotInterval
	}
	if cfg.RaftTuning != nil {
		cfg.RaftTuning(rc)
	}
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("raft: config: %w", err)
	}

	has, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return fmt.Errorf("raft: read existing state: %w", err)
	}
	var conf raft.Configuration
	switch {
	case has:
	case len(cfg.BootstrapPeers) > 0:
		conf.Servers = cfg.BootstrapPeers
	case cfg.BootstrapExpect <= 1:
		conf.Servers = []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: trans.LocalAddr()}}
	}
	if len(conf.Servers) > 0 {
		if err := raft.BootstrapCluster(rc, logs, store, snaps, trans, conf); err != nil {
			return fmt.Errorf("raft: bootstrap: %w", err)
		}
		s.logger.Info("bootstrapped raft cluster", "id", rc.LocalID, "address", trans.LocalAddr(), "servers", len(conf.Servers))
	}
	// Without state and a configuration, gossip bootstraps once
	// BootstrapExpect servers are known (membership.go).
	s.bootstrapped.Store(has || len(conf.Servers) > 0)

	r, err := raft.NewRaft(rc, s.fsm.RaftFSM(), logs, store, snaps, trans)
	if err != nil {
		return fmt.Errorf("raft: start: %w", err)
	}
	s.raft = r
	s.fenceRaft.Store(r)
	return nil
}

// openRaftStore opens the BoltDB log and stable store at path, turning a
// fault or bolt assertion during the open into an error wrapping
// ErrCorruptStore.
func openRaftStore(path string) (store *raftboltdb.BoltStore, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			store, err = nil, corrupt(path, fmt.Sprintf("opening it failed: %v", r))
		}
	}()
	return raftboltdb.New(raftboltdb.Options{
		Path: path,
		// Fail instead of hanging when another process holds the file.
		BoltOptions: &bbolt.Options{Timeout: storeOpenTimeout},
	})
}

// raftApply encodes msg with its type byte, applies it through Raft and
// waits for the FSM. It returns the FSM's response and the entry's index; an
// FSM response that is an error is returned as the error (its sentinels,
// such as structs.ErrNotFound, survive errors.Is). It returns an error
// wrapping structs.ErrNotLeader when this server is not the leader (the
// entry was not appended), and one wrapping structs.ErrOutcomeUnknown when
// leadership was lost after the entry was appended (it may yet commit).
func (s *Server) raftApply(t structs.MessageType, msg interface{}) (interface{}, uint64, error) {
	wait, err := s.raftApplyAsync(t, msg)
	if err != nil {
		return nil, 0, err
	}
	return wait()
}

// raftApplyAsync encodes msg and hands it to Raft without waiting for the
// commit; the returned function waits and answers as raftApply does.
// Entries handed over by one goroutine are appended in that order, and
// Raft writes those queued together in one disk write.
func (s *Server) raftApplyAsync(t structs.MessageType, msg interface{}) (func() (interface{}, uint64, error), error) {
	buf, err := structs.Encode(t, msg)
	if err != nil {
		return nil, err
	}
	if cap(buf)-len(buf) > len(buf)/16 {
		// The log cache keeps the entry as given, and the encoder's
		// buffer grew by doubling: up to twice its bytes (a 512-entry
		// cache of fleet status batches held 35 MB of it at 2,000 nodes).
		buf = bytes.Clone(buf)
	}
	start := time.Now()
	f := s.raft.Apply(buf, raftApplyTimeout)
	return func() (interface{}, uint64, error) {
		defer s.serverMetrics().observeApply(t, start)
		return raftApplyResult(t, f)
	}, nil
}

// raftApplyResult waits for f and maps its outcome (see raftApply).
func raftApplyResult(t structs.MessageType, f raft.ApplyFuture) (interface{}, uint64, error) {
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrLeadershipLost) {
			// The entry was appended but leadership was lost before it
			// committed: a later leader may still commit it.
			return nil, 0, fmt.Errorf("raft apply %s: %w (%v)", t, structs.ErrOutcomeUnknown, err)
		}
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			return nil, 0, fmt.Errorf("raft apply %s: %w: %v", t, structs.ErrNotLeader, err)
		}
		if errors.Is(err, raft.ErrRaftShutdown) {
			return nil, 0, fmt.Errorf("raft apply %s: %w", t, structs.ErrShutdown)
		}
		return nil, 0, fmt.Errorf("raft apply %s: %w", t, err)
	}
	resp := f.Response()
	if rerr, ok := resp.(error); ok {
		return nil, f.Index(), rerr
	}
	return resp, f.Index(), nil
}

// shutdownRaft stops Raft and closes its transport and stores.
func (s *Server) shutdownRaft() error {
	var errs []error
	if s.raft != nil {
		if err := s.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
	}
	if c, ok := s.raftTransport.(raft.WithClose); ok {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raft transport close: %w", err))
		}
	}
	if s.raftStore != nil {
		if err := s.raftStore.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raft store close: %w", err))
		}
	}
	return errors.Join(errs...)
}
