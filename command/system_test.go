package command

import (
	"fmt"
	"strings"
	"testing"
)

// TestSystemGC runs `system gc` against a real one-server agent with
// nothing to collect, then its usage and connection errors.
func TestSystemGC(t *testing.T) {
	addr := startServerAgent(t, "srv-gc")
	dead := fmt.Sprintf("http://127.0.0.1:%d", freeTCPPort(t))
	cases := []struct {
		name     string
		addr     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{name: "collects", addr: addr, args: []string{"system", "gc"}, wantOut: "Garbage collected 0 evaluations, 0 allocations, 0 jobs and 0 nodes"},
		{name: "json", addr: addr, args: []string{"system", "gc", "-json"}, wantOut: `"Allocs": 0`},
		{name: "extra argument", addr: addr, args: []string{"system", "gc", "x"}, wantCode: 1, wantErr: "takes no arguments"},
		{name: "no agent", addr: dead, args: []string{"system", "gc"}, wantCode: 1, wantErr: "Error running system garbage-collection"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCmd(t, c.addr, c.args...)
			if r.code != c.wantCode || !strings.Contains(r.out, c.wantOut) || !strings.Contains(r.err, c.wantErr) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", r.code, c.wantCode, r.out, c.wantOut, r.err, c.wantErr)
			}
		})
	}
}

func TestPlural(t *testing.T) {
	cases := []struct {
		n    int
		want string
	}{{0, "0 jobs"}, {1, "1 job"}, {2, "2 jobs"}}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			if got := plural(c.n, "job"); got != c.want {
				t.Fatalf("plural(%d) = %q, want %q", c.n, got, c.want)
			}
		})
	}
}
