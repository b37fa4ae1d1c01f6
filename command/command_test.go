package command

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// result is a command's exit code and output.
type result struct {
	code   int
	out    string
	err    string
	stdout string
}

// runCmd runs the CLI with args against addr, with a fixed clock in UTC.
func runCmd(t *testing.T, addr string, args ...string) result {
	t.Helper()
	t.Setenv("GPULAYER_ADDR", addr)
	ui := cli.NewMockUi()
	var raw bytes.Buffer
	m := &Meta{
		UI:           ui,
		Stdout:       &raw,
		Now:          func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) },
		Location:     time.UTC,
		PollInterval: 5 * time.Millisecond,
	}
	code := run(args, m)
	return result{code: code, out: ui.OutputWriter.String(), err: ui.ErrorWriter.String(), stdout: raw.String()}
}

// golden compares got with the reviewed fixture testdata/name. Only
// -update rewrites it (say so in the commit, and review the diff); a run
// without -update never writes testdata, and a missing file fails.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if old, err := os.ReadFile(path); err != nil || string(old) != got {
			t.Logf("-update: rewriting %s: review the diff before committing it", path)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update to accept):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

func TestGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"job_status_list.golden", []string{"job", "status"}},
		{"job_status.golden", []string{"job", "status", "hello"}},
		{"alloc_status.golden", []string{"alloc", "status", "abcd1234"}},
		{"node_status_list.golden", []string{"node", "status"}},
		{"node_status.golden", []string{"node", "status", "ef56"}},
		{"status_list.golden", []string{"status"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := newFakeAPI().serve(t)
			r := runCmd(t, ts.URL, tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			golden(t, tc.name, r.out)
		})
	}
}

func TestStatusDispatch(t *testing.T) {
	ts := newFakeAPI().serve(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "hello-gpu"}, "Summary"},
		{[]string{"status", "abcd1234"}, `Task "main" is "running"`},
		{[]string{"status", "ef567890"}, "GPU-aaaa"},
	} {
		t.Run(tc.args[1], func(t *testing.T) {
			r := runCmd(t, ts.URL, tc.args...)
			if r.code != 0 || !strings.Contains(r.out, tc.want) {
				t.Fatalf("exit %d, out %q, err %q; want %q", r.code, r.out, r.err, tc.want)
			}
		})
	}
	r := runCmd(t, ts.URL, "status", "zzz")
	if r.code != 1 || !strings.Contains(r.err, `No job, allocation or node matches "zzz"`) {
		t.Fatalf("exit %d, err %q", r.code, r.err)
	}
}

func TestJSONOutput(t *testing.T) {
	ts := newFakeAPI().serve(t)
	for _, args := range [][]string{
		{"job", "status", "-json", "hello-gpu"},
		{"alloc", "status", "-json", "abcd1234"},
		{"node", "status", "-json"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runCmd(t, ts.URL, args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			if !strings.HasPrefix(strings.TrimSpace(r.out), "{") && !strings.HasPrefix(strings.TrimSpace(r.out), "[") {
				t.Fatalf("not JSON: %s", r.out)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	ts := newFakeAPI().serve(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bad flag", []string{"job", "status", "-bogus"}, "flag provided but not defined: -bogus"},
		{"too many args", []string{"job", "status", "a", "b"}, "Usage: gpulayer job status"},
		{"alloc status no args", []string{"alloc", "status"}, "Usage: gpulayer alloc status"},
		{"missing job", []string{"job", "status", "nope"}, `No job(s) with prefix or ID "nope" found`},
		{"missing alloc", []string{"alloc", "status", "ffff"}, `No allocation(s) with prefix or ID "ffff" found`},
		{"ambiguous alloc", []string{"alloc", "status", "abcd"}, "Prefix matched multiple allocations"},
		{"missing node", []string{"node", "status", "0000"}, `No node(s) with prefix or ID "0000" found`},
		{"bad address", []string{"job", "status", "-address", "ftp://x"}, "scheme must be http or https"},
		{"job parent", []string{"job"}, "Usage: gpulayer job <subcommand>"},
		{"bad var", []string{"job", "run", "-var", "novalue", "x.hcl"}, "want key=value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, ts.URL, tc.args...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1; out %q err %q", r.code, r.out, r.err)
			}
			if !strings.Contains(r.err, tc.want) {
				t.Errorf("stderr %q lacks %q", r.err, tc.want)
			}
		})
	}
	t.Run("agent down", func(t *testing.T) {
		r := runCmd(t, "http://127.0.0.1:1", "job", "status")
		if r.code != 1 || !strings.Contains(r.err, "Error querying jobs") {
			t.Fatalf("exit %d err %q", r.code, r.err)
		}
	})
}

func TestVersion(t *testing.T) {
	r := runCmd(t, api.DefaultAddress, "version")
	if r.code != 0 || !strings.HasPrefix(r.out, "GPUlayer v"+Version+" (go") {
		t.Fatalf("exit %d out %q", r.code, r.out)
	}
}

// TestGroupHelp checks that a group command's help (job -h, alloc -h, ...)
// lists each subcommand on one line, "    name   synopsis", with the
// synopses aligned.
func TestGroupHelp(t *testing.T) {
	groups := []string{"job", "alloc", "node", "system", "server", "event", "operator", "operator raft", "deployment",
		"service", "endpoint", "node pool"}
	all := commands(&Meta{})
	for _, group := range groups {
		t.Run(group, func(t *testing.T) {
			r := runCmd(t, api.DefaultAddress, append(strings.Fields(group), "-h")...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			if !strings.Contains(r.err, "Usage: gpulayer "+group+" <subcommand>") || !strings.Contains(r.err, "\n\nSubcommands:\n") {
				t.Fatalf("help lacks usage or subcommand list:\n%s", r.err)
			}
			// The list is generated; a Help() that writes its own
			// shows the subcommands twice.
			if n := strings.Count(r.err, "Subcommands:"); n != 1 {
				t.Fatalf("help has %d subcommand lists:\n%s", n, r.err)
			}
			column := -1
			n := 0
			for key, factory := range all {
				name, ok := strings.CutPrefix(key, group+" ")
				if !ok || strings.Contains(name, " ") {
					continue
				}
				cmd, err := factory()
				if err != nil {
					t.Fatal(err)
				}
				line := regexp.MustCompile(`(?m)^    ` + regexp.QuoteMeta(name) + ` +` + regexp.QuoteMeta(cmd.Synopsis()) + `$`).FindString(r.err)
				if line == "" {
					t.Errorf("no line %q ... %q in:\n%s", "    "+name, cmd.Synopsis(), r.err)
					continue
				}
				if col := strings.Index(line, cmd.Synopsis()); column >= 0 && col != column {
					t.Errorf("synopsis of %q starts at column %d, others at %d:\n%s", name, col, column, r.err)
				} else {
					column = col
				}
				n++
			}
			if n == 0 {
				t.Fatalf("group %q has no subcommands", group)
			}
		})
	}
	// The example from the bug report, exactly (the column follows the
	// longest subcommand, "dispatch" and "periodic").
	r := runCmd(t, api.DefaultAddress, "job", "-h")
	if !strings.Contains(r.err, "\n    run         Run a new job or update an existing job\n") {
		t.Errorf("job -h:\n%s", r.err)
	}
}

// TestGroupUnknownSubcommand checks that a group command run with a word
// that names none of its subcommands says so before its help, and that the
// group alone prints its help; both exit 1.
func TestGroupUnknownSubcommand(t *testing.T) {
	cases := []struct {
		args    []string
		want    string
		wantNot string
	}{
		{[]string{"system", "bogus"}, `unknown subcommand "bogus"`, ""},
		{[]string{"operator", "raft", "nope"}, `unknown subcommand "nope"`, ""},
		{[]string{"job", "-x"}, `unknown flag "-x"`, ""},
		{[]string{"system"}, "", "unknown"},
		{[]string{"alloc"}, "", "unknown"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCmd(t, api.DefaultAddress, tc.args...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1; err %q", r.code, r.err)
			}
			usage := "Usage: gpulayer " + strings.Join(tc.args[:len(tc.args)-1], " ")
			if len(tc.args) == 1 {
				usage = "Usage: gpulayer " + tc.args[0]
			}
			if !strings.Contains(r.err, usage) || !strings.Contains(r.err, "Subcommands:") {
				t.Errorf("stderr lacks %q and the subcommand list:\n%s", usage, r.err)
			}
			if tc.want != "" && !strings.HasPrefix(r.err, tc.want) {
				t.Errorf("stderr does not start with %q:\n%s", tc.want, r.err)
			}
			if tc.wantNot != "" && strings.Contains(r.err, tc.wantNot) {
				t.Errorf("stderr has %q:\n%s", tc.wantNot, r.err)
			}
		})
	}
}
