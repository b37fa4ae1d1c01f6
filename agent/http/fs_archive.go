package http

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// ArtifactOpener is implemented by a Server that stores artifacts: it
// returns the blob digest (lower-case hex SHA-256), verified while read
// (a mismatch is a read error, never bad bytes), pulled from another
// server first when this one lacks it. The logs route reads an
// allocation's log archive (Allocation.LogArchive) through it once the
// node no longer has the logs. An unknown digest gives an error wrapping
// structs.ErrNotFound.
type ArtifactOpener interface {
	ArtifactOpen(ctx context.Context, digest string) (io.ReadCloser, error)
}

// LogArchiveFinder is implemented by a Server that can name the log
// archive an allocation uploaded after the allocation itself was
// collected: the artifact whose MediaType is structs.MediaTypeLogArchive
// and whose AllocRefs hold allocID (kept for the artifact retention
// period after the allocation is gone), with the namespace of the job it
// references ("" when that is unknown too). digest "" and no error when
// there is none.
type LogArchiveFinder interface {
	LogArchiveFor(ctx context.Context, allocID string) (digest, namespace string, err error)
}

// collectedAlloc returns a stand-in for a collected allocation that has a
// log archive the caller may read, or nil. The route's ACL check could
// not see the allocation's namespace (it is gone), so it is checked here:
// read-logs in the archive's namespace, or a management token when the
// namespace is unknown.
func (h *handler) collectedAlloc(r *http.Request, allocID string) *structs.Allocation {
	f, ok := h.srv.(LogArchiveFinder)
	if !ok {
		return nil
	}
	d, ns, err := f.LogArchiveFor(r.Context(), allocID)
	if err != nil || !structs.ValidDigest(d) {
		return nil
	}
	acl, _ := aclFrom(r)
	if !acl.IsManagement() && (ns == "" || !acl.AllowNamespaceOp(ns, structs.NamespaceCapabilityReadLogs)) {
		return nil
	}
	return &structs.Allocation{ID: allocID, Namespace: ns, LogArchive: d, ClientStatus: structs.AllocClientStatusComplete}
}

// Bounds of reading an archived log in memory: one rotated file (the
// client rotates at log_max_file_size, 10 MiB by default) and a whole
// stream read from its start.
const (
	maxArchivedLogFile = 64 << 20
	maxArchivedLogRead = 256 << 20
)

// archiveTailBytes bounds what a tail (lines=, origin=end) of an
// archived log keeps in memory: the last 16 MiB of the stream.
const archiveTailBytes = 16 << 20

// serveArchivedLogs answers a logs request from the allocation's log
// archive. It reports false (and writes nothing) when there is none or
// the server cannot open it, so the caller answers with its own error.
// The archive holds "<task>/<task>.<type>.<n>" files; they are streamed
// in rotation order, as the node would. follow ends with the archive (the
// task is dead).
func (h *handler) serveArchivedLogs(w http.ResponseWriter, r *http.Request, alloc *structs.Allocation, lr *logsRequest) bool {
	if alloc.LogArchive == "" || !structs.ValidDigest(alloc.LogArchive) {
		return false
	}
	op, ok := h.srv.(ArtifactOpener)
	if !ok {
		return false
	}
	rc, err := op.ArtifactOpen(r.Context(), alloc.LogArchive)
	if err != nil {
		h.logger.Warn("open log archive", "alloc_id", alloc.ID, "digest", alloc.LogArchive, "error", err)
		return false
	}
	defer rc.Close()
	var out bytes.Buffer
	if err := archivedLog(rc, lr.task, lr.logType, &out, lr.lines > 0 || lr.offset > 0); err != nil {
		h.logger.Warn("read log archive", "alloc_id", alloc.ID, "digest", alloc.LogArchive, "error", err)
		h.writeError(w, r, fmt.Errorf("log archive of allocation %q: %w", alloc.ID, err))
		return true
	}
	b := out.Bytes()
	if lr.offset > 0 && int64(len(b)) > lr.offset {
		b = b[int64(len(b))-lr.offset:]
	}
	if lr.lines > 0 {
		b = lastLines(b, lr.lines)
	}
	w.Header().Set("X-Gpulayer-Log-Source", "archive")
	h.streamLogs(w, bytes.NewReader(b), lr)
	return true
}

// archivedLog writes the concatenated rotated files of task's logType
// from the tar r to w; with tail only the last archiveTailBytes are kept.
// Entries are buffered per file (a rotated file is bounded by the
// client's log_max_file_size) and written in index order.
func archivedLog(r io.Reader, task, logType string, w *bytes.Buffer, tail bool) error {
	prefix := task + "/" + task + "." + logType + "."
	type part struct {
		n    int
		data []byte
	}
	var parts []part
	var total int64
	tr := tar.NewReader(r)
	for {
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if hd.Typeflag != tar.TypeReg || !strings.HasPrefix(hd.Name, prefix) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(hd.Name, prefix))
		if err != nil || n < 0 {
			continue
		}
		if hd.Size > maxArchivedLogFile {
			return fmt.Errorf("archived log file %s is %d bytes, over %d", hd.Name, hd.Size, maxArchivedLogFile)
		}
		data, err := io.ReadAll(io.LimitReader(tr, hd.Size))
		if err != nil {
			return err
		}
		total += int64(len(data))
		parts = append(parts, part{n, data})
		// Drop the oldest parts beyond the bound for a tail.
		sort.Slice(parts, func(i, j int) bool { return parts[i].n < parts[j].n })
		for tail && len(parts) > 1 && total-int64(len(parts[0].data)) >= archiveTailBytes {
			total -= int64(len(parts[0].data))
			parts = parts[1:]
		}
		if !tail && total > maxArchivedLogRead {
			return fmt.Errorf("archived log is over %d MiB; ask for its end (lines= or origin=end)", maxArchivedLogRead>>20)
		}
	}
	if len(parts) == 0 {
		return fmt.Errorf("%w: no %s log of task %q in the archive", structs.ErrNotFound, logType, task)
	}
	for _, p := range parts {
		w.Write(p.data)
	}
	return nil
}

// lastLines returns the last n lines of b.
func lastLines(b []byte, n int) []byte {
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	i := end
	for c := 0; i > 0; {
		i--
		if b[i] == '\n' {
			c++
			if c == n {
				return b[i+1:]
			}
		}
	}
	return b
}
