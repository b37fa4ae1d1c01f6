package http

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// The node routes' encodings: JSON, as every route speaks, and
// structs.ContentTypeNodeMsgpack for client agents, which decode and
// encode allocations and their status updates several times cheaper (a
// client agent's requests were most of a server's CPU while it placed a
// fleet's allocations). A request body is read as msgpack when its
// Content-Type says so; an answer is msgpack when the request's Accept
// names it. Errors are JSON either way ({"error": "..."}), as a client
// reads them from every route.

// handle registers fn on pattern like handler.handle, answering in
// msgpack when the request asks for it.
func (n *nodeRoutes) handle(pattern string, fn apiFunc) {
	n.h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		out, err := fn(w, r)
		if errors.Is(err, errParked) {
			return
		}
		if err != nil {
			n.h.writeError(w, r, err)
			return
		}
		if acceptsNodeMsgpack(r) {
			writeNodeMsgpack(w, r, n.h, out)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// acceptsNodeMsgpack reports whether r's Accept names
// structs.ContentTypeNodeMsgpack.
func acceptsNodeMsgpack(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == structs.ContentTypeNodeMsgpack {
			return true
		}
	}
	return false
}

// writeNodeMsgpack answers 200 with v in msgpack, or 500 when v does not
// encode (nothing is sent before it is whole).
func writeNodeMsgpack(w http.ResponseWriter, r *http.Request, h *handler, v interface{}) {
	var buf bytes.Buffer
	if err := structs.EncodeNodeWire(&buf, v); err != nil {
		h.writeError(w, r, fmt.Errorf("node route answer: %w", err))
		return
	}
	w.Header().Set("Content-Type", structs.ContentTypeNodeMsgpack)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	// The status is sent; a write error can only be a broken connection.
	_, _ = w.Write(buf.Bytes())
}

// decode reads a node route's request body of at most the handler's
// maxBody bytes into v: msgpack when its Content-Type is
// structs.ContentTypeNodeMsgpack, JSON otherwise (decodeBody). A body too
// large yields an *http.MaxBytesError (413); a malformed one, or one
// nested deeper than 64 levels, a 400 naming the problem.
func (n *nodeRoutes) decode(w http.ResponseWriter, r *http.Request, v interface{}) error {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != structs.ContentTypeNodeMsgpack {
		return n.h.decodeBody(w, r, v)
	}
	r.Body = http.MaxBytesReader(w, r.Body, n.h.maxBody)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("request body larger than %d bytes: %w", mbe.Limit, err)
		}
		return badRequest("reading request body: %v", err)
	}
	if err := structs.DecodeNodeWire(raw, v); err != nil {
		return badRequest("malformed msgpack body: %v", err)
	}
	return nil
}
