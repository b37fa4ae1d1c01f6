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
		{"artifact_gc_threshold", &s.ArtifactGCThreshold, func(g *server.GCConfig) *time.Duration { return &g.ArtifactGCThreshold }},
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
// not a duration, or out of range:
//   - job_gc_interval may be negative (the periodic collection is then off;
//     `system gc` still works) and otherwise must be at least
//     server.MinGCInterval (1 second): "1ns" made the leader collect
//     without pause, a core busy;
//   - a threshold must be above 0. Nomad would read "0s" as "collect at
//     once"; the server reads a zero threshold as its default, so "0s" is
//     refused rather than silently meaning, say, 24 hours. Leave the
//     setting out for the default, or run `gpulayer system gc` to collect
//     now.
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
		case f.name == "job_gc_interval":
			if d >= 0 && d < server.MinGCInterval {
				p = append(p, fmt.Sprintf("server.%s: must be at least %s (or negative to turn the periodic collection off), got %s", f.name, server.MinGCInterval, *f.val))
			}
		case d < 0:
			p = append(p, fmt.Sprintf("server.%s: must not be negative, got %s", f.name, *f.val))
		case d == 0:
			p = append(p, fmt.Sprintf("server.%s: must be above 0, got %s (leave it unset for the default; `gpulayer system gc` collects now)", f.name, *f.val))
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
