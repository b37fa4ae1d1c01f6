package http

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// logFrame is one frame of Nomad's log stream (its api.StreamFrame):
// Offset is the byte offset in the log after Data, File the log's name
// ("<task>.<type>"), Data the bytes (base64 in JSON). A frame with neither
// Data nor FileEvent is a heartbeat.
type logFrame struct {
	Offset    int64
	Data      []byte `json:",omitempty"`
	File      string `json:",omitempty"`
	FileEvent string `json:",omitempty"`
}

// streamLogs answers a logs request: raw text (stream) for plain=true,
// else Nomad's frames.
func (h *handler) streamLogs(w http.ResponseWriter, src io.Reader, lr *logsRequest) {
	if !lr.framed {
		h.stream(w, src, http.StatusOK)
		return
	}
	h.streamFrames(w, src, lr.task+"."+lr.logType)
}

// streamFrames writes src as a stream of JSON log frames, one per chunk
// read, flushing after each, until src ends or the client goes away.
func (h *handler) streamFrames(w http.ResponseWriter, src io.Reader, file string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	enc := json.NewEncoder(w)
	buf := make([]byte, logChunkBytes)
	var offset int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			offset += int64(n)
			if werr := enc.Encode(&logFrame{Offset: offset, Data: buf[:n], File: file}); werr != nil {
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
