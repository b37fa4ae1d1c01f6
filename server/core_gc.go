package server

import (
	"context"
	"fmt"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Garbage collection defaults, Nomad's (nomad/config.go), except
// DefaultPurgedJobGCThreshold, which Nomad does not have: Nomad collects a
// purged job's allocations with the eval threshold.
const (
	// DefaultGCInterval is how often the leader collects garbage.
	DefaultGCInterval = 5 * time.Minute
	// DefaultEvalGCThreshold is the age at which terminal evaluations and
	// finished allocations of service jobs are collected.
	DefaultEvalGCThreshold = time.Hour
	// DefaultBatchEvalGCThreshold is the same for batch jobs.
	DefaultBatchEvalGCThreshold = 24 * time.Hour
	// DefaultJobGCThreshold is the age at which stopped jobs and finished
	// batch jobs are purged.
	DefaultJobGCThreshold = 4 * time.Hour
	// DefaultNodeGCThreshold is how long a node must have been down before
	// it is deregistered.
	DefaultNodeGCThreshold = 24 * time.Hour
	// DefaultPurgedJobGCThreshold is the age at which the evaluations and
	// finished allocations of a purged job are collected.
	DefaultPurgedJobGCThreshold = time.Minute
	// MinGCInterval is the shortest pause between periodic collections;
	// a shorter positive GCConfig.Interval is raised to it. Each
	// collection snapshots the state and walks every evaluation,
	// allocation, job and node (about 2 µs an allocation, see
	// BenchmarkSelectGC), so an interval of nanoseconds kept a core busy
	// collecting. Nomad sets no minimum.
	MinGCInterval = time.Second
	// DefaultGCMaxIDsPerEntry bounds the IDs one Raft entry of a
	// collection carries (Nomad's MaxUUIDsPerWriteRequest is 7,281).
	DefaultGCMaxIDsPerEntry = 1000
)

// GCConfig tunes the leader's garbage collector. Zero values take the
// defaults named on each field.
type GCConfig struct {
	// Interval is the pause between periodic collections; zero means
	// DefaultGCInterval (5 minutes), a positive value below MinGCInterval
	// (1 second) means MinGCInterval, and a negative value turns the
	// periodic collection off (SystemGC still works).
	Interval time.Duration
	// EvalGCThreshold: zero means DefaultEvalGCThreshold (1 hour).
	EvalGCThreshold time.Duration
	// BatchEvalGCThreshold: zero means DefaultBatchEvalGCThreshold
	// (24 hours).
	BatchEvalGCThreshold time.Duration
	// JobGCThreshold: zero means DefaultJobGCThreshold (4 hours).
	JobGCThreshold time.Duration
	// NodeGCThreshold: zero means DefaultNodeGCThreshold (24 hours).
	NodeGCThreshold time.Duration
	// PurgedJobGCThreshold: zero means DefaultPurgedJobGCThreshold
	// (1 minute).
	PurgedJobGCThreshold time.Duration
	// ArtifactGCThreshold is how long an unreferenced artifact is kept;
	// zero means DefaultArtifactGCThreshold (24 hours).
	ArtifactGCThreshold time.Duration
	// MaxIDsPerEntry: zero means DefaultGCMaxIDsPerEntry (1,000).
	MaxIDsPerEntry int
}

// withDefaults returns c with its zero fields set to the defaults and a
// positive Interval below MinGCInterval raised to it.
func (c GCConfig) withDefaults() GCConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	switch {
	case c.Interval == 0:
		c.Interval = DefaultGCInterval
	case c.Interval > 0 && c.Interval < MinGCInterval:
		c.Interval = MinGCInterval
	}
	def(&c.EvalGCThreshold, DefaultEvalGCThreshold)
	def(&c.BatchEvalGCThreshold, DefaultBatchEvalGCThreshold)
	def(&c.JobGCThreshold, DefaultJobGCThreshold)
	def(&c.NodeGCThreshold, DefaultNodeGCThreshold)
	def(&c.PurgedJobGCThreshold, DefaultPurgedJobGCThreshold)
	def(&c.ArtifactGCThreshold, DefaultArtifactGCThreshold)
	if c.MaxIDsPerEntry <= 0 {
		c.MaxIDsPerEntry = DefaultGCMaxIDsPerEntry
	}
	return c
}

func (c GCConfig) thresholds() gcThresholds {
	return gcThresholds{eval: c.EvalGCThreshold, batchEval: c.BatchEvalGCThreshold, job: c.JobGCThreshold, node: c.NodeGCThreshold, purged: c.PurgedJobGCThreshold,
		artifact: c.ArtifactGCThreshold}
}

// GCResult counts what a collection chose to remove. A purge entry whose
// job or node changed before it was applied removes less (see
// structs.GCPurgeRequest).
type GCResult struct {
	Evals  int
	Allocs int
	Jobs   int
	Nodes  int
	// Artifacts counts the unreferenced artifacts whose metadata (and
	// then blobs) the collection removed.
	Artifacts int
}

// SystemGC collects garbage now with every threshold at zero, as Nomad's
// `system gc`: every terminal evaluation, finished allocation, stopped or
// finished batch job and down node that the rules of selectGC allow goes,
// whatever its age. The allocations of a live batch job stay, so finished
// work is not run again. A follower forwards the call to the leader in
// process when Config.LeaderLookup is set. It returns what was chosen,
// and errors wrapping structs.ErrNotLeader (also on a leader that has not
// finished establishing leadership), structs.ErrShutdown, or ctx's error
// when ctx ends between Raft entries.
func (s *Server) SystemGC(ctx context.Context) (*GCResult, error) {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.SystemGC(fctx)
	}
	if err := s.checkLeader(); err != nil {
		return nil, err
	}
	if !s.established.Load() {
		return nil, fmt.Errorf("system gc: %w: leadership not yet established", structs.ErrNotLeader)
	}
	cfg := s.config.GC.withDefaults()
	return s.collectGarbage(ctx, time.Now().UnixNano(), gcThresholds{}, cfg.MaxIDsPerEntry)
}

// gcLoop collects garbage every GCConfig.Interval while this server leads
// (it runs under the leader context); errors are logged and the next tick
// tries again.
func (s *Server) gcLoop(ctx context.Context) {
	cfg := s.config.GC.withDefaults()
	if cfg.Interval < 0 {
		return
	}
	log := s.logger.Named("gc")
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.collectGarbage(ctx, time.Now().UnixNano(), cfg.thresholds(), cfg.MaxIDsPerEntry); err != nil && ctx.Err() == nil {
			log.Warn("garbage collection failed", "error", err)
		}
	}
}

// collectGarbage decides on a snapshot what a collection at now (Unix
// nanoseconds) with thresholds th removes (selectGC), then commits it in
// Raft entries of at most maxIDs IDs each: evaluations and allocations
// first (EvalDeleteRequest), then job purges, then nodes (GCPurgeRequest).
// A job whose evaluations and allocations alone exceed maxIDs goes in an
// entry of its own. Collections run one at a time. It returns what was
// chosen and the first Raft error, or ctx's error.
func (s *Server) collectGarbage(ctx context.Context, now int64, th gcThresholds, maxIDs int) (*GCResult, error) {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	log := s.logger.Named("gc")
	snap, err := s.fsm.State().Snapshot()
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	w, err := selectGC(snap, now, th)
	if err != nil {
		return nil, err
	}
	res := w.result()
	if w.empty() {
		// Artifacts are chosen after the purges below, on a new snapshot.
		n, err := s.collectArtifacts(ctx, now, th.artifact, maxIDs)
		res.Artifacts = n
		if n > 0 {
			log.Info("garbage collected", "artifacts", n)
		}
		return res, err
	}
	for _, req := range evalDeleteBatches(w.evals, w.allocs, maxIDs) {
		if err := s.gcApply(ctx, structs.EvalDeleteRequestType, req); err != nil {
			return res, err
		}
	}
	for _, req := range purgeBatches(w.jobs, w.nodes, maxIDs) {
		if err := s.gcApply(ctx, structs.GCPurgeRequestType, req); err != nil {
			return res, err
		}
	}
	// Artifacts whose last job or allocation the entries above removed go
	// in the same collection (once as old as th.artifact).
	n, err := s.collectArtifacts(ctx, now, th.artifact, maxIDs)
	res.Artifacts = n
	log.Info("garbage collected", "evals", res.Evals, "allocs", res.Allocs, "jobs", res.Jobs, "nodes", res.Nodes, "artifacts", n)
	return res, err
}

// gcApply commits one entry of a collection unless ctx ended.
func (s *Server) gcApply(ctx context.Context, t structs.MessageType, req interface{}) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	if _, _, err := s.raftApply(t, req); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	return nil
}

// evalDeleteBatches splits evals and allocs into requests of at most maxIDs
// IDs, allocations first (so an evaluation never outlives the entry that
// removes its allocations).
func evalDeleteBatches(evals, allocs []string, maxIDs int) []*structs.EvalDeleteRequest {
	var out []*structs.EvalDeleteRequest
	cur := &structs.EvalDeleteRequest{}
	n := 0
	flush := func() {
		if n > 0 {
			out = append(out, cur)
			cur, n = &structs.EvalDeleteRequest{}, 0
		}
	}
	for _, id := range allocs {
		if n == maxIDs {
			flush()
		}
		cur.Allocs = append(cur.Allocs, id)
		n++
	}
	for _, id := range evals {
		if n == maxIDs {
			flush()
		}
		cur.Evals = append(cur.Evals, id)
		n++
	}
	flush()
	return out
}

// purgeBatches packs job purges, then node purges, into requests of at
// most maxIDs IDs (a job counts one plus its evaluations and allocations);
// a job larger than maxIDs gets a request of its own.
func purgeBatches(jobs []*structs.GCJobPurge, nodes []*structs.GCNodePurge, maxIDs int) []*structs.GCPurgeRequest {
	var out []*structs.GCPurgeRequest
	cur := &structs.GCPurgeRequest{}
	n := 0
	flush := func() {
		if n > 0 {
			out = append(out, cur)
			cur, n = &structs.GCPurgeRequest{}, 0
		}
	}
	for _, j := range jobs {
		size := 1 + len(j.Evals) + len(j.Allocs)
		if n > 0 && n+size > maxIDs {
			flush()
		}
		cur.Jobs = append(cur.Jobs, j)
		n += size
	}
	for _, nd := range nodes {
		if n >= maxIDs {
			flush()
		}
		cur.Nodes = append(cur.Nodes, nd)
		n++
	}
	flush()
	return out
}
