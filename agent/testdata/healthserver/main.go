// Command healthserver is the stand-in service of the services end-to-end
// tests and examples/model-server.hcl: it listens on 127.0.0.1 at
// $NOMAD_PORT_http and answers GET /health with 200 "ok", or 500 while a
// file named "unhealthy" exists in its working directory or
// HEALTH_FAIL=1 is set. Every other path answers with the value of
// $VERSION, so a test can tell versions apart.
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	port := os.Getenv("NOMAD_PORT_http")
	if port == "" {
		fmt.Fprintln(os.Stderr, "NOMAD_PORT_http is not set")
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if _, err := os.Stat("unhealthy"); err == nil || os.Getenv("HEALTH_FAIL") == "1" {
			http.Error(w, "unhealthy", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, os.Getenv("VERSION"))
	})
	srv := &http.Server{Addr: "127.0.0.1:" + port, Handler: mux}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		srv.Close()
	}()
	fmt.Println("listening on", srv.Addr)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
