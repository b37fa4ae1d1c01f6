package server

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gpulayer/gpulayer/server/artifacts"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// Artifact endpoints. The bytes of an artifact are in each server's blob
// store (ArtifactStore); the metadata is committed through Raft by
// ArtifactUpsert only after a server stored the bytes (agent/http does
// store, replicate, then commit). Writes run on the leader; reads answer
// from this server's state.

// openArtifactStore opens <DataDir>/artifacts.
func (s *Server) openArtifactStore() error {
	st, err := artifacts.Open(filepath.Join(s.config.DataDir, "artifacts"))
	if err != nil {
		return err
	}
	s.artifacts = st
	return nil
}

// ArtifactStore returns this server's blob store.
func (s *Server) ArtifactStore() *artifacts.Store { return s.artifacts }

// ArtifactUpsert commits the metadata of an artifact whose bytes a server
// stored: a new digest, or new job and allocation references of a known
// one (they are added to the stored ones). CreateTime and ModifyTime are
// set here (the leader's clock). It returns the stored metadata. Errors
// wrap structs.ErrInvalid (Validate), structs.ErrNotLeader.
func (s *Server) ArtifactUpsert(ctx context.Context, a *structs.Artifact) (*structs.Artifact, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: artifact: missing", structs.ErrInvalid)
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.ArtifactUpsert(fctx, a)
	}
	if err := s.checkLeader(); err != nil {
		return nil, err
	}
	c := a.Copy()
	now := time.Now().UnixNano()
	c.CreateTime, c.ModifyTime = now, now
	if _, _, err := s.raftApply(structs.ArtifactUpsertRequestType, &structs.ArtifactUpsertRequest{Artifacts: []*structs.Artifact{c}}); err != nil {
		return nil, fmt.Errorf("artifact %s: %w", a.Digest, err)
	}
	stored, err := s.fsm.State().ArtifactByDigest(nil, a.Digest)
	if err != nil {
		return nil, err
	}
	if stored == nil {
		return nil, fmt.Errorf("artifact %s: %w", a.Digest, structs.ErrNotFound)
	}
	return stored.Copy(), nil
}

// ArtifactReference adds job and allocation references to a stored
// artifact (a job whose task names artifact://sha256/<digest> as an input,
// an allocation that produced it), so retention keeps it and their
// readers may read it. Errors wrap structs.ErrNotFound for an unknown
// digest, structs.ErrInvalid, structs.ErrNotLeader.
func (s *Server) ArtifactReference(ctx context.Context, digest string, jobIDs, allocIDs []string) (*structs.Artifact, error) {
	a, err := s.fsm.State().ArtifactByDigest(nil, digest)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fmt.Errorf("artifact %s: %w", digest, structs.ErrNotFound)
	}
	c := a.Copy()
	c.JobRefs, c.AllocRefs = jobIDs, allocIDs
	return s.ArtifactUpsert(ctx, c)
}

// ArtifactGet returns an artifact's metadata from this server's state, a
// blocking query on the artifacts table. Errors wrap structs.ErrNotFound.
func (s *Server) ArtifactGet(ctx context.Context, digest string, q *structs.QueryOptions) (*structs.Artifact, structs.QueryMeta, error) {
	if err := structs.ValidArtifactDigest("digest", digest); err != nil {
		return nil, structs.QueryMeta{}, err
	}
	out, meta, err := s.artifactQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, error) {
		return st.ArtifactByDigest(ws, digest)
	})
	if err != nil {
		return nil, meta, err
	}
	a, _ := out.(*structs.Artifact)
	if a == nil {
		return nil, meta, fmt.Errorf("artifact %s: %w", digest, structs.ErrNotFound)
	}
	return a, meta, nil
}

// ArtifactList returns every artifact's metadata, sorted by digest, a
// blocking query on the artifacts table.
func (s *Server) ArtifactList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Artifact, structs.QueryMeta, error) {
	out, meta, err := s.artifactQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, error) {
		return st.Artifacts(ws)
	})
	if err != nil {
		return nil, meta, err
	}
	list, _ := out.([]*structs.Artifact)
	return list, meta, nil
}

// ArtifactsMissing returns the digests of ds that have no committed
// metadata, in the order given. Errors wrap structs.ErrInvalid for more
// than structs.MaxArtifactMissingDigests digests or a malformed one.
func (s *Server) ArtifactsMissing(ds []string) ([]string, error) {
	if len(ds) > structs.MaxArtifactMissingDigests {
		return nil, fmt.Errorf("%w: Digests: %d digests, at most %d", structs.ErrInvalid, len(ds), structs.MaxArtifactMissingDigests)
	}
	st := s.fsm.State()
	out := []string{}
	for i, d := range ds {
		if err := structs.ValidArtifactDigest(fmt.Sprintf("Digests[%d]", i), d); err != nil {
			return nil, err
		}
		a, err := st.ArtifactByDigest(nil, d)
		if err != nil {
			return nil, err
		}
		if a == nil {
			out = append(out, d)
		}
	}
	return out, nil
}

func (s *Server) artifactQuery(ctx context.Context, q *structs.QueryOptions, fn func(memdb.WatchSet, *state.StateStore) (interface{}, error)) (interface{}, structs.QueryMeta, error) {
	if q == nil {
		q = &structs.QueryOptions{}
	}
	return s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		out, err := fn(ws, st)
		if err != nil {
			return nil, 0, err
		}
		idx, err := st.Index(state.TableArtifacts)
		return out, idx, err
	})
}

// ArtifactPeers returns the HTTP addresses of the other live servers
// known through gossip (or Config.ArtifactPeers), where agent/http pushes
// and pulls blobs; empty without gossip.
func (s *Server) ArtifactPeers() []string {
	if s.config.ArtifactPeers != nil {
		return s.config.ArtifactPeers()
	}
	var out []string
	for _, m := range s.Members() {
		if m.Name == s.config.NodeName || m.Status != MemberAlive || m.HTTPAddr == "" {
			continue
		}
		out = append(out, m.HTTPAddr)
	}
	return out
}
