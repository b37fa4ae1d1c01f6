// Command modelserver is the stand-in OpenAI-compatible model server of
// the endpoint tests (issue 14). It listens on 127.0.0.1 at
// $NOMAD_PORT_http and serves:
//
//   - GET /v1/models: {"object":"list","data":[{"id":$MODEL,...}]}, or
//     the model named in a file "model" of the working directory when one
//     is there at start (a test makes one member serve another model);
//   - GET /health: 200 "ok";
//   - GET /v1/slow?chunks=N&interval_ms=M: a streaming (chunked,
//     text/event-stream) answer of N "data: <i>" events M ms apart;
//   - any other path: 200 with a JSON object naming the allocation
//     ($NOMAD_ALLOC_ID), the build (main.build, set with -ldflags -X to
//     make a different binary) and the request's X-Request-Id.
//
// Every request except /health and /v1/models is appended, before it is
// answered, to requests.log in the working directory (the task directory)
// as "<X-Request-Id> <method> <path>\n", so a test can tell which member
// got which request.
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// build tells builds apart (go build -ldflags "-X main.build=b").
var build = "a"

func main() {
	port := os.Getenv("NOMAD_PORT_http")
	if port == "" {
		fmt.Fprintln(os.Stderr, "NOMAD_PORT_http is not set")
		os.Exit(2)
	}
	model := os.Getenv("MODEL")
	if b, err := os.ReadFile("model"); err == nil {
		model = strings.TrimSpace(string(b))
	}
	alloc := os.Getenv("NOMAD_ALLOC_ID")
	logf, err := os.OpenFile("requests.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var logMu sync.Mutex
	record := func(r *http.Request) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(logf, "%s %s %s\n", r.Header.Get("X-Request-Id"), r.Method, r.URL.Path)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]interface{}{"object": "list",
			"data": []map[string]interface{}{{"id": model, "object": "model", "owned_by": "test"}}})
	})
	mux.HandleFunc("GET /v1/slow", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		n, _ := strconv.Atoi(r.URL.Query().Get("chunks"))
		ms, _ := strconv.Atoi(r.URL.Query().Get("interval_ms"))
		n, ms = min(max(n, 1), 10000), min(max(ms, 0), 10000)
		w.Header().Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		for i := 0; i < n; i++ {
			if _, err := fmt.Fprintf(w, "data: %d %s\n\n", i, alloc); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Duration(ms) * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"alloc": alloc, "build": build, "request": r.Header.Get("X-Request-Id")})
	})
	srv := &http.Server{Addr: "127.0.0.1:" + port, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		srv.Close()
	}()
	fmt.Println("listening on", srv.Addr, "model", model, "build", build)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
