package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// artifactSyncDelay is how long the sync waits after being woken before it
// looks: the leader pushes a new blob to every live server before it
// commits the metadata, so the blob is normally here already; the sync is
// for a server that was down or cut off during the push.
const artifactSyncDelay = 5 * time.Second

// artifactSyncRetry is how soon a sync that left blobs missing runs again.
const artifactSyncRetry = 30 * time.Second

// artifactSyncInterval is how often the sync runs without being woken.
const artifactSyncInterval = time.Hour

// wakeArtifactSync is the FSM's OnArtifactsUpserted: it wakes
// artifactSyncLoop without blocking the apply.
func (s *Server) wakeArtifactSync() {
	select {
	case s.artifactSync <- struct{}{}:
	default:
	}
}

// artifactSyncLoop runs SyncArtifacts at start, after artifact metadata
// was applied (artifactSyncDelay later) and every artifactSyncInterval,
// until ctx ends. It is the proactive half of replication: a server that
// missed the leader's push fetches the blob without waiting for a reader.
func (s *Server) artifactSyncLoop(ctx context.Context) {
	t := time.NewTicker(artifactSyncInterval)
	defer t.Stop()
	wake := time.After(artifactSyncDelay)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.artifactSync:
			if wake == nil {
				wake = time.After(artifactSyncDelay)
			}
			continue
		case <-wake:
			wake = nil
		case <-t.C:
		}
		if n, err := s.SyncArtifacts(ctx); err != nil {
			s.logger.Named("artifacts").Debug("artifact sync incomplete; retrying in 30s", "pulled", n, "error", err)
			wake = time.After(artifactSyncRetry)
		} else if n > 0 {
			s.logger.Named("artifacts").Info("pulled missing artifact blobs from other servers", "count", n)
		}
	}
}

// SyncArtifacts fetches, from the other servers, every blob whose
// metadata this server's state holds and its store lacks, verifying each
// (Store.Fetch). Peers answer only a request they may serve: one over
// HTTPS presenting this server's certificate (Config.ArtifactPeerTLS), or
// any with ACLs off. It returns how many blobs it fetched and the last
// error (nil when nothing was missing or every missing blob came).
func (s *Server) SyncArtifacts(ctx context.Context) (int, error) {
	arts, err := s.fsm.State().Artifacts(nil)
	if err != nil {
		return 0, err
	}
	var missing []*structs.Artifact
	for _, a := range arts {
		if ok, _, err := s.artifacts.Has(a.Digest); err == nil && !ok {
			missing = append(missing, a)
		}
	}
	if len(missing) == 0 {
		return 0, nil
	}
	peers := s.ArtifactPeers()
	if len(peers) == 0 {
		return 0, fmt.Errorf("%d artifact blobs missing and no other server known yet", len(missing))
	}
	client, scheme := s.artifactPeerClient()
	n := 0
	var last error
	for _, a := range missing {
		for _, addr := range peers {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			base := (&url.URL{Scheme: scheme, Host: addr}).String()
			fctx, cancel := context.WithTimeout(ctx, time.Hour)
			err := s.artifacts.Fetch(fctx, client, base, a.Digest, a.Size, nil)
			cancel()
			if err == nil {
				n++
				last = nil
				break
			}
			last = err
		}
	}
	return n, last
}

// artifactPeerClient returns the HTTP client and scheme of the sync.
func (s *Server) artifactPeerClient() (*http.Client, string) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	if s.config.ArtifactPeerTLS != nil {
		t.TLSClientConfig = s.config.ArtifactPeerTLS.Clone()
		return &http.Client{Transport: t}, "https"
	}
	return &http.Client{Transport: t}, "http"
}
