package http

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"
	"weak"

	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/structs"
)

// eventHeartbeat is how often an idle event stream sends "{}" so proxies
// and clients can tell a quiet stream from a dead one: 10 seconds, as
// Nomad's /v1/event/stream does.
const eventHeartbeat = 10 * time.Second

// eventSource is the part of a server that streams state changes; the
// agent's *server.Server has it.
type eventSource interface {
	Events(fromIndex uint64, topics structs.EventTopics) server.EventSubscription
}

// eventStreamError is the last line of a stream that had to end early.
type eventStreamError struct {
	Error string
}

// eventStream handles GET /v1/event/stream: newline-delimited JSON, one
// {"Index": N, "Events": [...]} line per Raft index with matching events,
// and "{}" every eventHeartbeat while idle. Parameters: ?index=N streams
// the events after Raft index N (absent or 0: from now on), and each
// ?topic=Topic or ?topic=Topic:key (Job, Allocation, Node, Evaluation,
// Deployment, Service, EndpointAlias, or * for all) narrows the stream; none means all. An index
// whose events are no longer held is refused with 410 Gone before the
// stream starts, or ends the stream with an {"Error": "..."} line when the
// reader falls that far behind later.
func (h *handler) eventStream(w http.ResponseWriter, r *http.Request) {
	src, ok := h.srv.(eventSource)
	if !ok {
		h.writeError(w, r, &codedError{code: http.StatusNotImplemented, msg: "this server does not publish events"})
		return
	}
	var from uint64
	if s := r.URL.Query().Get("index"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			h.writeError(w, r, badRequest("invalid index parameter %q: want a non-negative integer", s))
			return
		}
		from = v
	}
	topics, err := structs.ParseEventTopics(r.URL.Query()["topic"])
	if err != nil {
		h.writeError(w, r, badRequest("invalid topic parameter: %v", err))
		return
	}
	sub := src.Events(from, topics)
	// End the stream when the HTTP server shuts down, so a graceful
	// shutdown does not wait for it.
	ctx, cancel := streamContext(r)
	defer cancel()

	// Probe before committing to a 200: an expired context makes Next
	// return at once, with a batch already held, the truncation error, or
	// the context error when there is nothing yet.
	expired, expire := context.WithCancel(ctx)
	expire()
	first, err := sub.Next(expired)
	if errors.Is(err, server.ErrEventsTruncated) {
		h.writeError(w, r, &codedError{code: http.StatusGone, msg: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	send := func(v interface{}) bool {
		if err := enc.Encode(v); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	first = filterEvents(r, first)
	if first != nil {
		if !send(convert.EventBatchRead(first, h.region)) {
			return
		}
	} else if !send(struct{}{}) {
		return
	}
	for {
		beat, cancelBeat := context.WithTimeout(ctx, eventHeartbeat)
		batch, err := sub.Next(beat)
		cancelBeat()
		switch {
		case err == nil:
			if batch = filterEvents(r, batch); batch == nil {
				continue
			}
			if !send(convert.EventBatchRead(batch, h.region)) {
				return
			}
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
			if !send(struct{}{}) {
				return
			}
		default:
			h.logger.Debug("event stream ended", "error", err, "index", sub.Index())
			send(eventStreamError{Error: err.Error()})
			return
		}
	}
}

// streamContext returns a context for a long-lived response (an event
// stream, a followed log): it ends with the request, or as soon as the
// http.Server serving r begins a graceful shutdown, so Shutdown does not
// wait out its timeout for streams that would never end on their own.
// Call cancel when the response is done.
func streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	if done := serverShutdown(r); done != nil {
		go func() {
			select {
			case <-done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// shutdownChans maps each *http.Server (weakly) to a channel closed when it
// begins a graceful shutdown.
var shutdownChans sync.Map // weak.Pointer[http.Server] -> chan struct{}

// serverShutdown returns a channel closed when the http.Server serving r
// shuts down, or nil when r was not served by one (a test recorder).
func serverShutdown(r *http.Request) <-chan struct{} {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil {
		return nil
	}
	key := weak.Make(srv)
	if ch, ok := shutdownChans.Load(key); ok {
		return ch.(chan struct{})
	}
	ch := make(chan struct{})
	if prev, loaded := shutdownChans.LoadOrStore(key, ch); loaded {
		return prev.(chan struct{})
	}
	srv.RegisterOnShutdown(func() { close(ch) })
	runtime.AddCleanup(srv, func(k weak.Pointer[http.Server]) { shutdownChans.Delete(k) }, key)
	return ch
}
