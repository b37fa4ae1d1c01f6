package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// headerForwarded marks a log request one agent proxied to another, so the
// receiving agent never proxies it again.
const headerForwarded = "X-Gpulayer-Forwarded"

// logChunkBytes is the read size of a log stream; each chunk read is
// written and flushed at once.
const logChunkBytes = 32 << 10

// logsRequest is a parsed /v1/client/fs/logs request.
type logsRequest struct {
	allocID string
	task    string
	logType string
	follow  bool
	// lines and offset (bytes, with origin=end) ask for only the end of
	// the log; zero means from the start.
	lines  int
	offset int64
	// framed is set without plain=true: the answer is Nomad's stream of
	// JSON frames (logframes.go) instead of raw text.
	framed bool
}

// logTailer is implemented by clients that can start a log stream near its
// end (agent/client.Client.AllocLogsTail).
type logTailer interface {
	AllocLogsTail(ctx context.Context, allocID, task, logType string, follow bool, lines int, bytes int64) (io.ReadCloser, error)
}

// parseLogsRequest reads ?task=, ?type=stdout|stderr (default stdout),
// ?follow and ?plain: plain=true streams raw bytes, otherwise the answer
// is Nomad's stream of JSON frames (logframes.go).
func parseLogsRequest(r *http.Request) (*logsRequest, error) {
	plain, err := parseBool(r, "plain")
	if err != nil {
		return nil, err
	}
	follow, err := parseBool(r, "follow")
	if err != nil {
		return nil, err
	}
	lr := &logsRequest{allocID: r.PathValue("alloc"), task: r.URL.Query().Get("task"), follow: follow, framed: !plain}
	q := r.URL.Query()
	if v := q.Get("lines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, badRequest("invalid lines parameter %q: want a non-negative number of lines", v)
		}
		lr.lines = n
	}
	switch origin := q.Get("origin"); origin {
	case "", "start":
		if v := q.Get("offset"); v != "" && v != "0" {
			return nil, badRequest("offset is only supported with origin=end")
		}
	case "end":
		v := q.Get("offset")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, badRequest("invalid offset parameter %q: want a non-negative number of bytes", v)
		}
		lr.offset = n
	default:
		return nil, badRequest("invalid origin parameter %q: want start or end", origin)
	}
	switch t := r.URL.Query().Get("type"); t {
	case "", "stdout":
		lr.logType = "stdout"
	case "stderr":
		lr.logType = "stderr"
	default:
		return nil, badRequest("invalid type parameter %q: want stdout or stderr", t)
	}
	return lr, nil
}

// fsLogs handles GET /v1/client/fs/logs/{alloc}. It streams the task's log
// as text/plain, flushing after every chunk. When the allocation runs on
// another node, the request is proxied to that node's agent (HTTPAddr). The
// task may be omitted when the allocation's group has exactly one task.
func (h *handler) fsLogs(w http.ResponseWriter, r *http.Request) {
	lr, err := parseLogsRequest(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	alloc, _, err := h.srv.AllocGet(r.Context(), lr.allocID, &structs.QueryOptions{AllowStale: true})
	if errors.Is(err, structs.ErrNotFound) && lr.task != "" {
		// Collected by the servers: its log archive may outlive it.
		if ca := h.collectedAlloc(r, lr.allocID); ca != nil && h.serveArchivedLogs(w, r, ca, lr) {
			return
		}
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if lr.task == "" {
		if lr.task, err = onlyTask(alloc); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	if h.client != nil {
		if n := h.client.Node(); n != nil && n.ID == alloc.NodeID {
			h.streamLocal(w, r, lr, alloc)
			return
		}
	}
	if proxied(r) {
		h.writeError(w, r, fmt.Errorf("allocation %q does not run on this agent's node: %w", alloc.ID, structs.ErrNotFound))
		return
	}
	h.proxyLogs(w, r, alloc, lr)
}

// logsGone reports whether a logs request should fall back to the
// allocation's log archive: the allocation is finished and archived, and
// the node answered that it no longer has it (or could not be reached).
func logsGone(alloc *structs.Allocation) bool {
	return alloc.LogArchive != "" && alloc.ClientTerminalStatus()
}

// onlyTask returns the name of the allocation's only task, or a 400 error
// listing the tasks when there are several.
func onlyTask(alloc *structs.Allocation) (string, error) {
	if alloc.Job == nil {
		return "", badRequest("task parameter is required")
	}
	tg := alloc.Job.LookupTaskGroup(alloc.TaskGroup)
	if tg == nil {
		return "", badRequest("task parameter is required")
	}
	if len(tg.Tasks) == 1 && tg.Tasks[0] != nil {
		return tg.Tasks[0].Name, nil
	}
	names := make([]string, 0, len(tg.Tasks))
	for _, t := range tg.Tasks {
		if t != nil {
			names = append(names, t.Name)
		}
	}
	return "", badRequest("task parameter is required: group %q has tasks %s", tg.Name, strings.Join(names, ", "))
}

// streamLocal copies the local client's log stream to w.
func (h *handler) streamLocal(w http.ResponseWriter, r *http.Request, lr *logsRequest, alloc *structs.Allocation) {
	var rc io.ReadCloser
	var err error
	// A followed log never ends by itself: it ends with the request or
	// when the agent shuts down.
	ctx, cancel := streamContext(r)
	defer cancel()
	if t, ok := h.client.(logTailer); ok && (lr.lines > 0 || lr.offset > 0) {
		rc, err = t.AllocLogsTail(ctx, lr.allocID, lr.task, lr.logType, lr.follow, lr.lines, lr.offset)
	} else {
		rc, err = h.client.AllocLogs(ctx, lr.allocID, lr.task, lr.logType, lr.follow)
	}
	if err != nil {
		if errors.Is(err, structs.ErrNotFound) && alloc != nil && logsGone(alloc) && h.serveArchivedLogs(w, r, alloc, lr) {
			return
		}
		h.writeError(w, r, err)
		return
	}
	defer rc.Close()
	// A reader blocked in Read ends when the request is canceled.
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	defer stop()
	h.streamLogs(w, rc, lr)
}

// stream writes status and copies src to w, flushing after every chunk,
// until src ends or the client goes away.
func (h *handler) stream(w http.ResponseWriter, src io.Reader, status int) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, logChunkBytes)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
				h.logger.Debug("log stream ended", "error", err)
			}
			return
		}
	}
}

// proxyLogs forwards the request to the agent of the allocation's node and
// streams its answer back unchanged (status and body).
func (h *handler) proxyLogs(w http.ResponseWriter, r *http.Request, alloc *structs.Allocation, lr *logsRequest) {
	node, _, err := h.srv.NodeGet(r.Context(), alloc.NodeID, &structs.QueryOptions{AllowStale: true})
	if logsGone(alloc) && (err != nil || node == nil || node.Status == structs.NodeStatusDown || node.HTTPAddr == "") &&
		h.serveArchivedLogs(w, r, alloc, lr) {
		return
	}
	if err != nil {
		h.writeError(w, r, fmt.Errorf("node %q of allocation %q: %w", alloc.NodeID, alloc.ID, err))
		return
	}
	if node.HTTPAddr == "" {
		h.writeError(w, r, fmt.Errorf("node %q has no HTTP address to read logs from", node.ID))
		return
	}
	base, err := h.peers.nodeURL(node.HTTPAddr)
	if err != nil {
		h.writeError(w, r, fmt.Errorf("node %q HTTP address %q: %w", node.ID, node.HTTPAddr, err))
		return
	}
	addr := base.String()
	params := url.Values{}
	params.Set("task", lr.task)
	params.Set("type", lr.logType)
	params.Set("follow", fmt.Sprint(lr.follow))
	params.Set("plain", "true")
	if lr.lines > 0 {
		params.Set("lines", strconv.Itoa(lr.lines))
	}
	if lr.offset > 0 {
		params.Set("origin", "end")
		params.Set("offset", strconv.FormatInt(lr.offset, 10))
	}
	target := strings.TrimSuffix(addr, "/") + "/v1/client/fs/logs/" + url.PathEscape(alloc.ID) + "?" + params.Encode()
	ctx, cancel := streamContext(r)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		h.writeError(w, r, fmt.Errorf("proxy logs to node %q: %w", node.ID, err))
		return
	}
	// The caller's read-logs right was checked here; the node's agent
	// gets the node's secret, never the caller's token (node_proxy.go).
	if req.Header, err = h.nodeProxyHeader(r, node.ID); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.logger.Debug("proxying logs", "alloc_id", alloc.ID, "node_id", node.ID, "addr", node.HTTPAddr)
	resp, err := h.peers.node.Do(req)
	if err != nil && logsGone(alloc) && h.serveArchivedLogs(w, r, alloc, lr) {
		return
	}
	if err != nil {
		h.writeError(w, r, fmt.Errorf("proxy logs to node %q at %s: %w", node.ID, node.HTTPAddr, err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && logsGone(alloc) && h.serveArchivedLogs(w, r, alloc, lr) {
		return
	}
	if resp.StatusCode != http.StatusOK {
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, 64<<10))
		return
	}
	h.streamLogs(w, resp.Body, lr)
}
