package agent

import (
	"fmt"
	"time"

	"github.com/gpulayer/gpulayer/server"
)

// gcField is one garbage-collection setting of the server block: its HCL
// name, its value in the config and where it goes in server.GCConfig.
type gcField struct {
	name string
	val  *string
	dst  func(*server.GCConfig) *time.Duration
}

// gcFields lists the garbage-collection settings of the server block.
func (s *ServerConfig) gcFields() []gcField {
	return []gcField{
		{"job_gc_interval", &s.JobGCInterval, func(g *server.GCConfig) *time.Duration { return &g.Interval }},
		{"eval_gc_threshold", &s.EvalGCThreshold, func(g *server.GCConfig) *time.Duration { return &g.EvalGCThreshold }},
		{"batch_eval_gc_threshold", &s.BatchEvalGCThreshold, func(g *server.GCConfig) *time.Duration { return &g.BatchEvalGCThreshold }},
		{"job_gc_threshold", &s.JobGCThreshold, func(g *server.GCConfig) *time.Duration { return &g.JobGCThreshold }},
		{"node_gc_threshold", &s.NodeGCThreshold, func(g *server.GCConfig) *time.Duration { return &g.NodeGCThreshold }},
	}
}

// mergeGC overlays the garbage-collection settings o sets.
func (s *ServerConfig) mergeGC(o *ServerConfig) {
	dst, src := s.gcFields(), o.gcFields()
	for i := range dst {
		if *src[i].val != "" {
			*dst[i].val = *src[i].val
		}
	}
}

// validateGC returns one message per garbage-collection setting that is
// not a duration, or is negative (job_gc_interval may be negative: the
// periodic collection is then off, `system gc` still works).
func (s *ServerConfig) validateGC() []string {
	var p []string
	for _, f := range s.gcFields() {
		if *f.val == "" {
			continue
		}
		d, err := time.ParseDuration(*f.val)
		switch {
		case err != nil:
			p = append(p, fmt.Sprintf("server.%s: %q is not a duration such as \"4h\"", f.name, *f.val))
		case d < 0 && f.name != "job_gc_interval":
			p = append(p, fmt.Sprintf("server.%s: must not be negative, got %s", f.name, *f.val))
		}
	}
	return p
}

// gcConfig returns the server's garbage collector settings; unset and
// unparsable ones (Validate reports those) are left zero, the server's
// defaults.
func (s *ServerConfig) gcConfig() server.GCConfig {
	var g server.GCConfig
	for _, f := range s.gcFields() {
		if d, err := time.ParseDuration(*f.val); err == nil {
			*f.dst(&g) = d
		}
	}
	return g
}
