// Package servertest starts in-process GPUlayer servers for tests of any
// package: a single dev-mode server on a temporary data dir, with an
// in-memory Raft transport, shut down when the test ends.
package servertest

import (
	"context"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// LeaderTimeout bounds how long NewServer waits for leadership.
const LeaderTimeout = 10 * time.Second

// Option changes the server's config before it starts.
type Option func(*server.Config)

// WithDataDir uses dir instead of a fresh t.TempDir(), e.g. to restart a
// server on the same data.
func WithDataDir(dir string) Option { return func(c *server.Config) { c.DataDir = dir } }

// WithSchedulers sets the number of scheduler workers.
func WithSchedulers(n int) Option { return func(c *server.Config) { c.NumSchedulers = n } }

// WithLogger sets the server's logger (the default discards logs).
func WithLogger(l hclog.Logger) Option { return func(c *server.Config) { c.Logger = l } }

// WithConfig applies fn to the config, for any other field.
func WithConfig(fn func(*server.Config)) Option { return Option(fn) }

// Config returns the config NewServer would use: a dev-mode server named
// "server-test" with an in-memory Raft transport at the address
// "server-test" on a fresh t.TempDir(), then opts applied.
func Config(t testing.TB, opts ...Option) *server.Config {
	t.Helper()
	_, trans := raft.NewInmemTransport(raft.ServerAddress("server-test"))
	cfg := &server.Config{
		DataDir:       t.TempDir(),
		NodeName:      "server-test",
		DevMode:       true,
		NumSchedulers: 2,
		Transport:     trans,
		Logger:        hclog.NewNullLogger(),
	}
	for _, o := range opts {
		o(cfg)
	}
	return cfg
}

// NewServer starts a server with Config(t, opts...), waits until it leads
// (failing the test after LeaderTimeout) and shuts it down at the end of
// the test.
func NewServer(t testing.TB, opts ...Option) *server.Server {
	t.Helper()
	return Start(t, Config(t, opts...))
}

// Start starts a server with cfg, waits until it leads and registers its
// shutdown with t.Cleanup.
func Start(t testing.TB, cfg *server.Config) *server.Server {
	t.Helper()
	s, err := server.NewServer(cfg)
	if err != nil {
		t.Fatalf("servertest: start server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(); err != nil {
			t.Errorf("servertest: shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), LeaderTimeout)
	defer cancel()
	if err := s.WaitForLeader(ctx); err != nil {
		t.Fatalf("servertest: %v", err)
	}
	return s
}
