// Package http serves GPUlayer's /v1/ HTTP API: jobs, allocations,
// evaluations, nodes, status, agent and client log routes. It maps the
// sentinel errors of the structs package to HTTP status codes and turns the
// ?index=&wait= parameters into blocking queries.
//
// The package declares the small Server and Client interfaces it consumes;
// the agent passes its *server.Server and *client.Client and owns the
// listener.
package http

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
)

// DefaultMaxBodyBytes is the largest request body accepted when
// Config.MaxBodyBytes is zero: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// Server is what the HTTP API needs from a GPUlayer server. Reads take
// QueryOptions (a blocking query when MinQueryIndex is set) and return the
// QueryMeta sent back in the X-Gpulayer-* headers. Errors wrap the structs
// sentinels (ErrNotFound, ErrInvalid, ErrNotLeader, ErrNoLeader,
// ErrPermissionDenied), which the API maps to status codes.
type Server interface {
	JobRegister(ctx context.Context, job *structs.Job) (*structs.JobRegisterResponse, error)
	JobDeregister(ctx context.Context, jobID string, purge bool) (*structs.JobDeregisterResponse, error)
	JobList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Job, structs.QueryMeta, error)
	JobGet(ctx context.Context, jobID string, q *structs.QueryOptions) (*structs.Job, structs.QueryMeta, error)
	JobAllocations(ctx context.Context, jobID string, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error)
	JobEvaluations(ctx context.Context, jobID string, q *structs.QueryOptions) ([]*structs.Evaluation, structs.QueryMeta, error)
	AllocList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Allocation, structs.QueryMeta, error)
	AllocGet(ctx context.Context, allocID string, q *structs.QueryOptions) (*structs.Allocation, structs.QueryMeta, error)
	EvalGet(ctx context.Context, evalID string, q *structs.QueryOptions) (*structs.Evaluation, structs.QueryMeta, error)
	NodeList(ctx context.Context, q *structs.QueryOptions) ([]*structs.Node, structs.QueryMeta, error)
	NodeGet(ctx context.Context, nodeID string, q *structs.QueryOptions) (*structs.Node, structs.QueryMeta, error)
	// Leader returns the leader's Raft address, or "" when there is none.
	Leader() string
	// Peers returns the Raft addresses of the servers.
	Peers() []string
	// Stats returns Raft and server statistics for /v1/agent/self.
	Stats() map[string]string
}

// Client is what the HTTP API needs from a GPUlayer client (the worker).
type Client interface {
	// AllocLogs streams a task's "stdout" or "stderr" log. With follow it
	// keeps streaming new output until the task is dead or ctx is done.
	// It returns an error wrapping structs.ErrNotFound for an unknown
	// allocation or task.
	AllocLogs(ctx context.Context, allocID, task, logType string, follow bool) (io.ReadCloser, error)
	// Node returns the client's own node.
	Node() *structs.Node
}

// Config configures the API handler.
type Config struct {
	// Server answers the cluster routes. Required unless Client is set: a
	// client-only agent (no local server) serves only the routes of its own
	// client (logs, agent self, health).
	Server Server
	// Client serves logs of allocations on this agent; nil on a server-only
	// agent.
	Client Client
	// Logger is the parent logger; nil means hclog.NewNullLogger(). The
	// handler logs under the "http" name.
	Logger hclog.Logger
	// Self returns the agent's description for /v1/agent/self (config,
	// version); nil means only the server's stats are shown.
	Self func() map[string]interface{}
	// MaxBodyBytes caps request bodies, in bytes; zero means
	// DefaultMaxBodyBytes (1 MiB). Larger bodies get 413.
	MaxBodyBytes int64
	// LocalOnly puts the handler behind LocalOnly (localonly.go): only
	// the agent's loopback Host and its own origin are answered. The
	// agent sets it in -dev mode, which has no accounts.
	LocalOnly bool
	// MaxSnapshotBytes caps the archive of PUT /v1/operator/snapshot, in
	// bytes; zero means MaxSnapshotBytes (1 GiB). Larger archives get 413.
	MaxSnapshotBytes int64
	// ServerTLS, when set, makes forwarding to the leader HTTPS with this
	// client configuration, which must verify the leader's server
	// certificate (agent/tlsutil Bundle.ServerHTTPClient). Nil means
	// plain HTTP.
	ServerTLS *tls.Config
	// NodeTLS, when set, makes proxying to a node's agent HTTPS with this
	// client configuration, which must verify the node's client
	// certificate (Bundle.NodeHTTPClient). Nil means plain HTTP.
	NodeTLS *tls.Config
	// ACLEnabled turns on the token check of every route (auth.go).
	ACLEnabled bool
	// ServerPeerName, when set (with tls.http), is the certificate name of
	// a server, "server.<region>.gpulayer": a request over TLS whose
	// verified client certificate has it, and that carries no token, is
	// another server's artifact blob sync and may read any artifact.
	ServerPeerName string
	// MaxArtifactBytes caps one artifact upload, in bytes; zero means
	// DefaultMaxArtifactBytes (8 GiB). MaxBodyBytes does not apply to
	// uploads.
	MaxArtifactBytes int64
	// Region is the agent's region, answered by GET /v1/regions and in
	// every job read; empty means "global".
	Region string
	// Resolver resolves token secrets when ACLEnabled; nil means Server,
	// which must then implement TokenResolver. A client-only agent passes
	// NewRemoteResolver.
	Resolver TokenResolver
	// Parker, when set, parks the node routes' blocking queries while
	// they wait (park.go); nil blocks them in their handler.
	Parker *Parker
}

// handler is the API: a ServeMux with JSON errors for unknown routes and
// methods, and a request log.
type handler struct {
	srv     Server
	client  Client
	logger  hclog.Logger
	self    func() map[string]interface{}
	maxBody int64
	mux     *routeMux
	// aclEnabled and resolver drive the one ACL check (auth.go).
	aclEnabled bool
	resolver   TokenResolver
	// cluster and fwd serve the HA routes and forward writes to the
	// leader when the server implements ClusterServer (cluster.go,
	// forward.go); nil otherwise.
	cluster ClusterServer
	fwd     *forwarder
	// metrics is the Prometheus registry behind /v1/metrics (metrics.go).
	metrics *httpMetrics
	// maxSnapshot caps snapshot restore bodies; 0 means MaxSnapshotBytes.
	maxSnapshot int64
	// serverTLS and peers reach other agents (peer_tls.go).
	serverTLS *tls.Config
	peers     *peers
	// arts, artRepl and maxArtifactBytes serve the artifact routes
	// (artifacts.go); arts is nil when the server has no store.
	arts             ArtifactServer
	artRepl          *replicator
	maxArtifactBytes int64
	serverPeerName   string
	// region is Config.Region, "global" when empty.
	region string
	// parker is Config.Parker.
	parker *Parker
}

// New returns the API handler. It fails when both cfg.Server and
// cfg.Client are nil or MaxBodyBytes is negative.
func New(cfg Config) (http.Handler, error) {
	if cfg.Server == nil && cfg.Client == nil {
		return nil, errors.New("http: config needs a Server or a Client")
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, errors.New("http: MaxBodyBytes must not be negative")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	h := &handler{
		srv:     cfg.Server,
		client:  cfg.Client,
		logger:  logger.Named("http"),
		self:    cfg.Self,
		maxBody: cfg.MaxBodyBytes,
		mux:     newRouteMux(),

		maxSnapshot:      cfg.MaxSnapshotBytes,
		maxArtifactBytes: cfg.MaxArtifactBytes,
		serverPeerName:   cfg.ServerPeerName,
		// peer_tls.go
		serverTLS: cfg.ServerTLS,
		peers:     newPeers(cfg.NodeTLS),

		aclEnabled: cfg.ACLEnabled,
		resolver:   cfg.Resolver,
		region:     cfg.Region,
		parker:     cfg.Parker,
	}
	if h.region == "" {
		h.region = "global"
	}
	if h.aclEnabled && h.resolver == nil {
		r, ok := cfg.Server.(TokenResolver)
		if !ok {
			return nil, errors.New("http: ACLs enabled without a token Resolver")
		}
		h.resolver = r
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	h.routes()
	if err := h.observabilityRoutes(); err != nil {
		return nil, err
	}
	if cfg.LocalOnly {
		return LocalOnly(h), nil
	}
	return h, nil
}

// routes registers every /v1/ route; one file per resource holds the
// handlers.
func (h *handler) routes() {
	h.clientSecretRoutes()
	if h.srv == nil {
		h.clientOnlyRoutes()
		return
	}
	h.nodeRoutes()
	h.aclRoutes()
	h.clusterRoutes()
	h.systemRoutes()
	h.artifactRoutes()
	// Services and checks (services.go).
	h.serviceRoutes()
	h.checkRoutes()
	// Node pools (node_pools.go).
	h.nodePoolRoutes()
	// Endpoint routers of this agent's client (issue 14).
	h.clientEndpointRoutes()
	// Provisioning: a pool's status (node_pool_status.go).
	h.nodePoolStatusRoutes()
	h.handle("PUT /v1/jobs", h.jobRegister)
	h.handle("POST /v1/jobs", h.jobRegister)
	h.handle("POST /v1/jobs/parse", h.jobParse)
	h.handle("GET /v1/jobs", h.jobList)
	h.handle("GET /v1/job/{id}", h.jobGet)
	h.handle("DELETE /v1/job/{id}", h.jobDeregister)
	h.handle("GET /v1/job/{id}/allocations", h.jobAllocations)
	h.handle("GET /v1/job/{id}/evaluations", h.jobEvaluations)
	h.wireRoutes()
	// Periodic and parameterized jobs (jobs_children.go).
	h.childrenRoutes()
	h.schedulingRoutes()
	// Job validation (jobs_validate.go).
	h.validateRoutes()
	// Job versions and deployments.
	h.jobVersionRoutes()
	h.deploymentRoutes()
	h.actionRoutes()
	h.handle("GET /v1/allocations", h.allocList)
	h.handle("GET /v1/allocation/{id}", h.allocGet)
	h.handle("GET /v1/evaluation/{id}", h.evalGet)
	h.handle("GET /v1/nodes", h.nodeList)
	h.handle("GET /v1/node/{id}", h.nodeGet)
	h.handle("GET /v1/status/leader", h.statusLeader)
	h.handle("GET /v1/status/peers", h.statusPeers)
	h.mux.HandleFunc("GET /v1/status/health", h.statusHealth)
	h.handle("GET /v1/agent/self", h.agentSelf)
	h.mux.HandleFunc("GET /v1/client/fs/logs/{alloc}", h.fsLogs)
	// Endpoint aliases and the fleet view (endpoints_fleet.go).
	h.endpointRoutes()
}

// apiFunc is a route that returns a value to encode as JSON, or an error to
// map to a status code. It may set headers before returning.
type apiFunc func(w http.ResponseWriter, r *http.Request) (interface{}, error)

func (h *handler) handle(pattern string, fn apiFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		out, err := fn(w, r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// ServeHTTP logs the request and dispatches it. Requests the mux does not
// route (unknown path, wrong method) get a JSON error body.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	route, pattern := h.mux.Handler(r)
	r, mark := h.markParkable(r, pattern)
	if mark != nil && mark.resumed {
		start = mark.start
	}
	defer func() {
		if mark != nil && mark.parked {
			// Taken over (park.go): its resumed run logs and counts it.
			return
		}
		h.logger.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.code(), "duration", time.Since(start))
		h.metrics.observe(pattern, r.Method, sw.code(), time.Since(start))
	}()
	if pattern == "" {
		// The mux's own 404 or 405 (with its Allow header): record the
		// status, then answer in JSON.
		rec := &headerRecorder{header: http.Header{}}
		route.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			sw.Header().Set("Allow", allow)
		}
		h.writeError(sw, r, routeError(rec.status, r))
		return
	}
	ar, err := h.authorize(r, pattern)
	if err != nil {
		// A token this follower does not know yet may be newer than its
		// state: a write goes to the leader, which checks it again with
		// the newest state. Anything the follower would run itself is
		// refused.
		if errors.Is(err, structs.ErrACLTokenNotFound) && h.cluster != nil && leaderRoutes[pattern] && !h.cluster.IsLeader() {
			if h.maybeForward(sw, r, pattern) {
				return
			}
		}
		h.writeAuthError(sw, r, pattern, err)
		return
	}
	if h.maybeForward(sw, ar, pattern) {
		return
	}
	h.mux.ServeHTTP(sw, ar)
}

// statusWriter remembers the status code for the request log and passes
// Flush through for streamed logs.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush sends buffered data to the client, when the underlying writer can.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// headerRecorder captures the status and headers the mux's fallback
// handlers write, discarding their plain-text body.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }

func (h *headerRecorder) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(b), nil
}

func (h *headerRecorder) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}
