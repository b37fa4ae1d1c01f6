package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
)

func TestConfigGC(t *testing.T) {
	cases := []struct {
		name    string
		src     string
		want    server.GCConfig
		wantErr string
	}{
		{name: "unset keeps the server defaults", src: `server { enabled = true }`},
		{
			name: "every setting",
			src: `server {
  enabled                 = true
  job_gc_interval         = "1m"
  eval_gc_threshold       = "30m"
  batch_eval_gc_threshold = "12h"
  job_gc_threshold        = "2h"
  node_gc_threshold       = "48h"
}`,
			want: server.GCConfig{Interval: time.Minute, EvalGCThreshold: 30 * time.Minute, BatchEvalGCThreshold: 12 * time.Hour, JobGCThreshold: 2 * time.Hour, NodeGCThreshold: 48 * time.Hour},
		},
		{name: "negative interval turns the periodic collection off", src: `server { job_gc_interval = "-1s" }`, want: server.GCConfig{Interval: -time.Second}},
		{name: "not a duration", src: `server { job_gc_threshold = "soon" }`, wantErr: `server.job_gc_threshold: "soon" is not a duration`},
		{name: "negative threshold", src: `server { node_gc_threshold = "-1h" }`, wantErr: "server.node_gc_threshold: must not be negative"},
		{name: "interval of 1ns", src: `server { job_gc_interval = "1ns" }`, wantErr: "server.job_gc_interval: must be at least 1s (or negative to turn the periodic collection off), got 1ns"},
		{name: "interval of 0s", src: `server { job_gc_interval = "0s" }`, wantErr: "server.job_gc_interval: must be at least 1s"},
		{name: "interval at the minimum", src: `server { job_gc_interval = "1s" }`, want: server.GCConfig{Interval: time.Second}},
		{name: "zero threshold", src: `server { eval_gc_threshold = "0s" }`, wantErr: "server.eval_gc_threshold: must be above 0, got 0s"},
		{name: "zero threshold without a unit", src: `server { batch_eval_gc_threshold = "0" }`, wantErr: "server.batch_eval_gc_threshold: must be above 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fileCfg, err := ParseConfig("agent.hcl", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.Server.Enabled = true
			cfg.Merge(fileCfg)
			err = cfg.Validate()
			if tc.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Server.gcConfig(); got != tc.want {
				t.Fatalf("gc config %+v, want %+v", got, tc.want)
			}
		})
	}
}
