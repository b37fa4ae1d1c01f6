package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/artifacts"
	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/structs"
)

// ArtifactConn is implemented by a ServerConn that also reaches the
// servers' artifact store (HTTPServerConn; the in-process server once it
// serves artifacts). nodeID picks the node secret that authenticates the
// call. Digests are lower-case hex SHA-256.
type ArtifactConn interface {
	// ArtifactsMissing returns those of digests the servers lack.
	ArtifactsMissing(ctx context.Context, nodeID string, digests []string) ([]string, error)
	// ArtifactPut uploads size bytes from r under hex.
	ArtifactPut(ctx context.Context, nodeID, hex string, r io.Reader, size int64, mediaType, jobID, allocID string) error
	// ArtifactGet streams the blob hex; an unknown one gives an error
	// wrapping structs.ErrNotFound.
	ArtifactGet(ctx context.Context, nodeID, hex string) (io.ReadCloser, error)
}

// nodeArtifactStore is an artifacts.Store over an ArtifactConn for one
// node.
type nodeArtifactStore struct {
	conn   ArtifactConn
	nodeID string
}

func (s nodeArtifactStore) Missing(ctx context.Context, digests []string) ([]string, error) {
	return s.conn.ArtifactsMissing(ctx, s.nodeID, digests)
}

func (s nodeArtifactStore) Put(ctx context.Context, hex string, r io.Reader, size int64, mediaType, jobID, allocID string) error {
	return s.conn.ArtifactPut(ctx, s.nodeID, hex, r, size, mediaType, jobID, allocID)
}

func (s nodeArtifactStore) Get(ctx context.Context, hex string) (io.ReadCloser, error) {
	rc, err := s.conn.ArtifactGet(ctx, s.nodeID, hex)
	if errors.Is(err, structs.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", artifacts.ErrNotFound, err)
	}
	return rc, err
}

// artifactStore is Config.Artifacts, else the server connection when it
// reaches the artifact store, else nil.
func (c *Client) artifactStore() artifacts.Store {
	if c.cfg.Artifacts != nil {
		return c.cfg.Artifacts
	}
	ac, ok := c.cfg.ArtifactConn, c.cfg.ArtifactConn != nil
	if !ok {
		ac, ok = c.cfg.Servers.(ArtifactConn)
	}
	if ok {
		c.mu.Lock()
		id := c.node.ID
		c.mu.Unlock()
		return nodeArtifactStore{conn: ac, nodeID: id}
	}
	return nil
}

// artifactCache is the client's cache of verified blobs,
// <DataDir>/artifact-cache/sha256.
func (c *Client) artifactCache() *artifacts.Cache {
	return &artifacts.Cache{
		Dir:   filepath.Join(c.cfg.DataDir, "artifact-cache", "sha256"),
		Store: c.artifactStore(),
		HTTP:  c.cfg.ArtifactHTTPClient,
	}
}

// artifactsHook is the task's prestart hook that fetches its artifacts:
// each is fetched (or found in the cache), verified and written beneath the
// task directory. The first failure is returned naming the artifact's
// source, and ends the task with an "Failed Artifact Download" event.
type artifactsHook struct {
	// cache returns the client's blob cache; called only when the task
	// has artifacts (its store depends on the node's ID).
	cache func() *artifacts.Cache
}

func (artifactsHook) name() string         { return "artifacts" }
func (artifactsHook) failureEvent() string { return structs.TaskEventArtifactDownloadFailed }

func (h artifactsHook) prestart(ctx context.Context, tr *taskRunner) error {
	if len(tr.task.Artifacts) == 0 {
		return nil
	}
	tr.setState(tr.event(structs.TaskEventDownloadingArtifacts, "Client is downloading artifacts", nil), nil)
	cache := h.cache()
	root, err := allocdir.OpenRoot(tr.cfg.AllocDir, tr.task.Name)
	if err != nil {
		return err
	}
	defer root.Close()
	for i, a := range tr.task.Artifacts {
		if a == nil {
			continue
		}
		f, err := cache.Open(ctx, a)
		if err != nil {
			return fmt.Errorf("artifact %d (%s): %w", i+1, a.GetterSource, err)
		}
		err = artifacts.Place(root, a, f, 0)
		f.Close()
		if err != nil {
			return fmt.Errorf("artifact %d (%s): %w", i+1, a.GetterSource, err)
		}
	}
	return nil
}

// outputLimits are the client's per-task output limits.
func (c *Client) outputLimits() artifacts.OutputLimits {
	return artifacts.OutputLimits{MaxFiles: c.cfg.OutputMaxFiles, MaxBytes: c.cfg.OutputMaxBytes}
}

// artifactTimeout bounds the uploads of one finished allocation.
const artifactTimeout = 30 * time.Minute

// collectOutputs runs once every task is dead: it uploads each task's
// outputs and returns those to record (all tasks' or, when any task's
// failed, none of that task's). Each task gets an event saying what
// happened. The logs are archived after the final status is reported
// (archiveLogs).
func (ar *allocRunner) collectOutputs(tasks []*structs.Task) []*structs.ArtifactRef {
	store := ar.c.artifactStore()
	ctx, cancel := context.WithTimeout(ar.c.ctx, artifactTimeout)
	defer cancel()
	var outputs []*structs.ArtifactRef
	jobID := ar.alloc.JobID
	for _, t := range tasks {
		refs, event := ar.taskOutputs(ctx, store, t.Name, jobID)
		if event != nil {
			ar.updateTask(t.Name, event, nil)
		}
		outputs = append(outputs, refs...)
	}
	sort.Slice(outputs, func(i, j int) bool { return outputs[i].Path < outputs[j].Path })
	return outputs
}

// archiveLogs uploads the log files of the allocation's tasks as one
// archive and returns its digest ("" when there was nothing to archive or
// the upload failed, which is logged).
func (c *Client) archiveLogs(allocID, jobID string, tasks []string) string {
	store := c.artifactStore()
	if store == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(c.ctx, artifactTimeout)
	defer cancel()
	digest, err := artifacts.ArchiveLogs(ctx, store, filepath.Join(c.cfg.DataDir, "allocs", allocID), tasks, filepath.Join(c.cfg.DataDir, "artifact-cache"), jobID, allocID)
	if err != nil {
		c.logger.Warn("archive logs", "alloc_id", allocID, "error", err)
		return ""
	}
	return digest
}

// taskOutputs collects and uploads one task's output directory. It
// returns the refs to record (none on any failure) and the event.
func (ar *allocRunner) taskOutputs(ctx context.Context, store artifacts.Store, task, jobID string) ([]*structs.ArtifactRef, *structs.TaskEvent) {
	ev := func(typ, msg string) *structs.TaskEvent {
		return &structs.TaskEvent{Type: typ, Time: time.Now().UnixNano(), Message: msg, DisplayMessage: msg}
	}
	root, err := allocdir.OpenRoot(ar.allocDir, task+"/outputs")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, ev(structs.TaskEventOutputsFailed, "Outputs not collected: "+err.Error())
	}
	defer root.Close()
	files, skipped, err := artifacts.CollectOutputs(root, ar.c.outputLimits())
	if err != nil {
		return nil, ev(structs.TaskEventOutputsFailed, "No outputs recorded: "+err.Error())
	}
	if len(files) == 0 && len(skipped) == 0 {
		return nil, nil
	}
	if len(files) > 0 && store == nil {
		return nil, ev(structs.TaskEventOutputsFailed, "No outputs recorded: the servers do not store artifacts")
	}
	if err := artifacts.UploadOutputs(ctx, store, root, files, jobID, ar.alloc.ID); err != nil {
		return nil, ev(structs.TaskEventOutputsFailed, "No outputs recorded: "+err.Error())
	}
	refs := make([]*structs.ArtifactRef, len(files))
	var total int64
	for i, f := range files {
		refs[i] = &structs.ArtifactRef{Path: task + "/" + f.Path, Digest: f.Digest, Size: f.Size}
		total += f.Size
	}
	msg := fmt.Sprintf("Uploaded %d output files (%d bytes)", len(files), total)
	if len(skipped) > 0 {
		if len(skipped) > 5 {
			skipped = append(skipped[:5], fmt.Sprintf("and %d more", len(skipped)-5))
		}
		msg += "; skipped what is not a regular file: " + strings.Join(skipped, ", ")
	}
	return refs, ev(structs.TaskEventOutputsUploaded, msg)
}

// resumeLogArchives uploads the log archives of allocations an earlier
// life of this client reported finished but stopped before their upload
// (allocRecord.LogsPending), then records and reports each digest.
func (c *Client) resumeLogArchives() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, rec := range c.finished {
		if !rec.LogsPending {
			continue
		}
		if c.archiving == nil {
			c.archiving = map[string]chan struct{}{}
		}
		done := make(chan struct{})
		c.archiving[id] = done
		tasks := make([]string, 0, len(rec.TaskStates))
		for name := range rec.TaskStates {
			tasks = append(tasks, name)
		}
		sort.Strings(tasks)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() {
				c.mu.Lock()
				delete(c.archiving, id)
				c.mu.Unlock()
				close(done)
			}()
			digest := c.archiveLogs(id, rec.JobID, tasks)
			if digest == "" && c.ctx.Err() != nil {
				return // shutting down: still pending for the next life
			}
			final := &allocRecord{ClientStatus: rec.ClientStatus, ClientDescription: rec.ClientDescription, TaskStates: rec.TaskStates}
			if err := c.state.finishAlloc(id, final); err != nil {
				c.logger.Error("record final alloc status", "alloc_id", id, "error", err)
			}
			c.mu.Lock()
			if c.finished[id] != nil {
				c.finished[id] = final
			}
			nodeID := c.node.ID
			c.mu.Unlock()
			if digest != "" {
				c.sync.enqueue(&structs.Allocation{ID: id, NodeID: nodeID, ClientStatus: rec.ClientStatus,
					ClientDescription: rec.ClientDescription, TaskStates: rec.TaskStates, LogArchive: digest})
			}
		}()
	}
}

// archivingDone returns the channel closed once the pending log archive
// of allocID is uploaded, or nil when none is pending.
func (c *Client) archivingDone(allocID string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.archiving[allocID]
}
