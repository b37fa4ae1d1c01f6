package agent

import (
	"fmt"
	"net/http"
	"time"

	agenthttp "github.com/gpulayer/gpulayer/agent/http"
	"github.com/hashicorp/go-hclog"
)

// LimitsConfig is the agent's `limits` block, Nomad's names where Nomad has
// the setting:
//
//	limits {
//	  http_max_conns_per_client = 100   # open connections per client IP; -1: no limit
//	  https_handshake_timeout   = "5s"  # TLS handshake (used with tls { http = true })
//	  http_read_header_timeout  = "10s" # request line and headers
//	  http_body_read_timeout    = "60s" # a request body (not exec stdin)
//	  http_snapshot_read_timeout = "1h" # the body of PUT /v1/operator/snapshot
//	  http_idle_timeout         = "2m"  # a keep-alive connection with no request
//	  http_max_header_bytes     = 65536 # request line and headers
//	  snapshot_restore_max_bytes = 1073741824 # the archive of PUT /v1/operator/snapshot
//	  artifact_max_bytes        = 8589934592 # one artifact upload (PUT /v1/artifact/sha256/{hex})
//	}
//
// Zero or empty fields take the defaults above (agent/http's Default*).
type LimitsConfig struct {
	HTTPMaxConnsPerClient   int    `hcl:"http_max_conns_per_client,optional"`
	HTTPSHandshakeTimeout   string `hcl:"https_handshake_timeout,optional"`
	HTTPReadHeaderTimeout   string `hcl:"http_read_header_timeout,optional"`
	HTTPBodyReadTimeout     string `hcl:"http_body_read_timeout,optional"`
	HTTPSnapshotReadTimeout string `hcl:"http_snapshot_read_timeout,optional"`
	HTTPIdleTimeout         string `hcl:"http_idle_timeout,optional"`
	HTTPMaxHeaderBytes      int    `hcl:"http_max_header_bytes,optional"`
	SnapshotRestoreMaxBytes int64  `hcl:"snapshot_restore_max_bytes,optional"`
	ArtifactMaxBytes        int64  `hcl:"artifact_max_bytes,optional"`
}

// DefaultHTTPSHandshakeTimeout is Nomad's https_handshake_timeout: 5 s.
const DefaultHTTPSHandshakeTimeout = 5 * time.Second

// limitsDurations lists the duration fields with their HCL names and
// defaults.
func (l *LimitsConfig) durations() []struct {
	name string
	val  string
	def  time.Duration
} {
	return []struct {
		name string
		val  string
		def  time.Duration
	}{
		{"https_handshake_timeout", l.HTTPSHandshakeTimeout, DefaultHTTPSHandshakeTimeout},
		{"http_read_header_timeout", l.HTTPReadHeaderTimeout, agenthttp.DefaultReadHeaderTimeout},
		{"http_body_read_timeout", l.HTTPBodyReadTimeout, agenthttp.DefaultBodyReadTimeout},
		{"http_snapshot_read_timeout", l.HTTPSnapshotReadTimeout, agenthttp.DefaultSnapshotReadTimeout},
		{"http_idle_timeout", l.HTTPIdleTimeout, agenthttp.DefaultIdleTimeout},
	}
}

// validateLimits returns the problems of the limits block, each naming
// its field.
func (c *Config) validateLimits() []string {
	l := c.Limits
	if l == nil {
		return nil
	}
	var p []string
	for _, f := range l.durations() {
		if f.val == "" {
			continue
		}
		d, err := time.ParseDuration(f.val)
		if err != nil || d <= 0 || d > 24*time.Hour {
			p = append(p, fmt.Sprintf("limits.%s: must be a duration between 1ns and 24h such as \"10s\", got %q", f.name, f.val))
		}
	}
	if l.HTTPMaxConnsPerClient < -1 || l.HTTPMaxConnsPerClient > 1_000_000 {
		p = append(p, fmt.Sprintf("limits.http_max_conns_per_client: must be -1 (no limit), 0 (default %d) or up to 1000000, got %d",
			agenthttp.DefaultMaxConnsPerClient, l.HTTPMaxConnsPerClient))
	}
	if l.HTTPMaxHeaderBytes < 0 || l.HTTPMaxHeaderBytes > 16<<20 {
		p = append(p, fmt.Sprintf("limits.http_max_header_bytes: must be 0 (default %d) to 16777216, got %d",
			agenthttp.DefaultMaxHeaderBytes, l.HTTPMaxHeaderBytes))
	}
	if l.SnapshotRestoreMaxBytes < 0 || l.SnapshotRestoreMaxBytes > 1<<40 {
		p = append(p, fmt.Sprintf("limits.snapshot_restore_max_bytes: must be 0 (default %d) to 1099511627776 (1 TiB), got %d",
			int64(agenthttp.MaxSnapshotBytes), l.SnapshotRestoreMaxBytes))
	}
	if l.ArtifactMaxBytes < 0 || l.ArtifactMaxBytes > 1<<40 {
		p = append(p, fmt.Sprintf("limits.artifact_max_bytes: must be 0 (default %d) to 1099511627776 (1 TiB), got %d",
			agenthttp.DefaultMaxArtifactBytes, l.ArtifactMaxBytes))
	}
	return p
}

// mergeLimits overlays the set fields of o's limits onto c's.
func (c *Config) mergeLimits(o *LimitsConfig) {
	if o == nil {
		return
	}
	if c.Limits == nil {
		c.Limits = &LimitsConfig{}
	}
	l := c.Limits
	if o.HTTPMaxConnsPerClient != 0 {
		l.HTTPMaxConnsPerClient = o.HTTPMaxConnsPerClient
	}
	if o.HTTPMaxHeaderBytes != 0 {
		l.HTTPMaxHeaderBytes = o.HTTPMaxHeaderBytes
	}
	if o.SnapshotRestoreMaxBytes != 0 {
		l.SnapshotRestoreMaxBytes = o.SnapshotRestoreMaxBytes
	}
	if o.ArtifactMaxBytes != 0 {
		l.ArtifactMaxBytes = o.ArtifactMaxBytes
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&l.HTTPSHandshakeTimeout, o.HTTPSHandshakeTimeout)
	set(&l.HTTPReadHeaderTimeout, o.HTTPReadHeaderTimeout)
	set(&l.HTTPBodyReadTimeout, o.HTTPBodyReadTimeout)
	set(&l.HTTPSnapshotReadTimeout, o.HTTPSnapshotReadTimeout)
	set(&l.HTTPIdleTimeout, o.HTTPIdleTimeout)
}

// HTTPLimits are the limits block resolved: every field set.
type HTTPLimits struct {
	MaxConnsPerClient   int // -1: no limit
	HandshakeTimeout    time.Duration
	ReadHeaderTimeout   time.Duration
	BodyReadTimeout     time.Duration
	SnapshotReadTimeout time.Duration
	IdleTimeout         time.Duration
	MaxHeaderBytes      int
	MaxSnapshotBytes    int64
	// MaxArtifactBytes is 0 for agent/http's default (8 GiB).
	MaxArtifactBytes int64
}

// HTTPLimits returns the limits with the defaults filled in. Fields that
// do not parse (Validate reports those) take their default.
func (c *Config) HTTPLimits() HTTPLimits {
	l := c.Limits
	if l == nil {
		l = &LimitsConfig{}
	}
	out := HTTPLimits{MaxConnsPerClient: l.HTTPMaxConnsPerClient, MaxHeaderBytes: l.HTTPMaxHeaderBytes, MaxSnapshotBytes: l.SnapshotRestoreMaxBytes, MaxArtifactBytes: l.ArtifactMaxBytes}
	if out.MaxSnapshotBytes == 0 {
		out.MaxSnapshotBytes = agenthttp.MaxSnapshotBytes
	}
	if out.MaxConnsPerClient == 0 {
		out.MaxConnsPerClient = agenthttp.DefaultMaxConnsPerClient
	}
	if out.MaxHeaderBytes == 0 {
		out.MaxHeaderBytes = agenthttp.DefaultMaxHeaderBytes
	}
	dst := []*time.Duration{&out.HandshakeTimeout, &out.ReadHeaderTimeout, &out.BodyReadTimeout, &out.SnapshotReadTimeout, &out.IdleTimeout}
	for i, f := range l.durations() {
		*dst[i] = f.def
		if d, err := time.ParseDuration(f.val); err == nil && d > 0 {
			*dst[i] = d
		}
	}
	return out
}

// newHTTPServer returns the agent's http.Server for handler with the
// limits: header and idle timeouts and header size on the server, the body
// deadline per request (agenthttp.WithBodyDeadline; ReadTimeout stays
// zero so exec streams live). The caller wraps the listener with
// agenthttp.LimitConnsPerClient.
func newHTTPServer(handler http.Handler, lim HTTPLimits, logger hclog.Logger) *http.Server {
	return &http.Server{
		Handler:           agenthttp.WithBodyDeadline(handler, lim.BodyReadTimeout, lim.SnapshotReadTimeout),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ErrorLog:          logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
}
