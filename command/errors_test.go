package command

import (
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// Tests that errors tell the user what to do (issue 11, defect 10).

// TestServerValidationErrorNamesFileLine: a jobspec the parser accepts
// but the server refuses (an unknown driver, `type = "batchh"`) is shown
// at the file:line:col of each field the server names, for job run and
// job plan, against a real server.
func TestServerValidationErrorNamesFileLine(t *testing.T) {
	addr := startServerAgent(t, "srv-val")
	waitLeader(t, addr)
	path := filepath.Join(t.TempDir(), "bad.hcl")
	src := `job "bad" {
  type = "batchh"
  group "g" {
    task "t" {
      driver = "dockr"
      config {
        command = "/bin/true"
      }
    }
    task "u" {
      driver = "native"
      config {
        command = "/bin/true"
      }
      resources {
        device "nvidia/gpu" {
          count = 0
        }
      }
    }
  }
}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		path + `:2:3: type: must be "batch" or "service", got "batchh"`,
		path + `:5:7: group "g": task "t": driver: unknown driver "dockr"`,
		path + `:17:11: group "g": task "u": resources: device "nvidia/gpu": count: must be at least 1, got 0`,
	}
	for _, verb := range [][]string{{"job", "run", "-detach", path}, {"job", "plan", path}} {
		r := runCmd(t, addr, verb...)
		if r.code != 1 {
			t.Errorf("%s: exit %d, want 1: %s", verb[1], r.code, r.err)
		}
		for _, w := range want {
			if !strings.Contains(r.err, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", verb[1], w, r.err)
			}
		}
	}
}

// TestNoAgentSaysHowToStartOne: with no agent at the address, a command
// says so and how to start one or point elsewhere, not a bare dial error.
func TestNoAgentSaysHowToStartOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	spec := writeFile(t, "ok.hcl", `job "ok" {
  group "g" {
    task "t" {
      driver = "native"
      config { command = "/bin/true" }
    }
  }
}
`)
	for _, args := range [][]string{{"job", "status"}, {"node", "status"}, {"job", "run", "-detach", spec}, {"alloc", "logs", "-job", "x"}} {
		r := runCmd(t, addr, args...)
		if r.code != 1 {
			t.Errorf("%v: exit %d, want 1", args, r.code)
		}
		for _, w := range []string{"no GPUlayer agent answers at " + addr, "gpulayer agent -dev", "-address", "GPULAYER_ADDR"} {
			if !strings.Contains(r.err, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, w, r.err)
			}
		}
	}
}

// TestNeverStartedTaskHasNoExitCode: a dead task that never started shows
// no exit code, not 0 next to Failed = true.
func TestNeverStartedTaskHasNoExitCode(t *testing.T) {
	f := newFakeAPI()
	for _, a := range f.allocs {
		if strings.HasPrefix(a.ID, "abcd1234") {
			ts := a.TaskStates["main"]
			ts.State, ts.Failed, ts.StartedAt, ts.ExitCode = "dead", true, time.Time{}, 0
		}
	}
	r := runCmd(t, f.serve(t).URL, "alloc", "status", "abcd1234")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if !strings.Contains(r.out, "Exit Code   = none (never started)") || strings.Contains(r.out, "Exit Code   = 0") {
		t.Errorf("never-started task's exit code:\n%s", r.out)
	}
}

// TestAllocLogsUnknownJobSaysNotFound: `alloc logs -job nosuchjob` says
// the job is not found, not that it has no allocations.
func TestAllocLogsUnknownJobSaysNotFound(t *testing.T) {
	ts := newFakeAPI().serve(t)
	r := runCmd(t, ts.URL, "alloc", "logs", "-job", "nosuchjob")
	if r.code != 1 || !strings.Contains(r.err, `job "nosuchjob" not found`) || strings.Contains(r.err, "has no allocations") {
		t.Errorf("exit %d, stderr %q", r.code, r.err)
	}
}

// TestFlagAfterArgumentHint: a flag written after the job file is not a
// flag to Go's flag parsing; the error says to put it first and shows how.
func TestFlagAfterArgumentHint(t *testing.T) {
	ts := newFakeAPI().serve(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"job", "run", "job.hcl", "-detach"}, "gpulayer job run -detach job.hcl"},
		{[]string{"job", "plan", "job.hcl", "-var", "x=1"}, "gpulayer job plan -var x=1 job.hcl"},
		{[]string{"job", "status", "hello-gpu", "-json"}, "gpulayer job status -json hello-gpu"},
	}
	for _, tc := range cases {
		r := runCmd(t, ts.URL, tc.args...)
		if r.code != 1 || !strings.Contains(r.err, "flags go before the arguments") || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant a hint with %q", tc.args, r.code, r.err, tc.want)
		}
	}
	// Two arguments without a flag get no hint.
	r := runCmd(t, ts.URL, "job", "run", "a.hcl", "b.hcl")
	if strings.Contains(r.err, "flags go before") {
		t.Errorf("hint without a flag:\n%s", r.err)
	}
}

// TestBareCommandPrintsHelpExitsOne: `gpulayer` alone prints the usage and
// exits 1 (as Nomad does), not 127.
func TestBareCommandPrintsHelpExitsOne(t *testing.T) {
	for _, args := range [][]string{nil, {"nosuchcommand"}} {
		r := runCmd(t, "http://127.0.0.1:1", args...)
		if r.code != 1 || !strings.Contains(r.err, "Usage: gpulayer") || !strings.Contains(r.err, "job") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.err)
		}
	}
}

// TestRefusalsSayWhatToDo: a 403 names the token to send (none sent, an
// unknown one, one without the rights), and a failed TLS handshake names
// the flag it needs, instead of the bare "Permission denied" or x509
// error.
func TestRefusalsSayWhatToDo(t *testing.T) {
	forbidden := func(msg string) error { return &api.StatusError{Code: http.StatusForbidden, Message: msg} }
	cases := []struct {
		name, token string
		err         error
		want        string
	}{
		{"no token", "", forbidden("Permission denied"), "pass -token or set GPULAYER_TOKEN"},
		{"unknown token", "s3cret", forbidden("ACL token not found"), "not one the cluster knows"},
		{"expired token", "s3cret", forbidden("ACL token expired"), "not one the cluster knows"},
		{"token without rights", "s3cret", forbidden("Permission denied"), "acl token self"},
		{"unknown CA", "", errors.New(`Get "https://127.0.0.1:4656/v1/jobs": tls: failed to verify certificate: x509: certificate signed by unknown authority`), "-ca-cert"},
		{"no client certificate", "", errors.New("remote error: tls: certificate required"), "-client-cert and -client-key"},
		{"https agent, http address", "", &api.StatusError{Code: 400, Message: "Client sent an HTTP request to an HTTPS server."}, "https://"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ui := cli.NewMockUi()
			m := &Meta{UI: ui, token: tc.token}
			if code := m.errorf("Error listing jobs: %v", tc.err); code != 1 {
				t.Fatalf("exit %d, want 1", code)
			}
			if got := ui.ErrorWriter.String(); !strings.Contains(got, tc.want) {
				t.Fatalf("printed %q, want a hint with %q", got, tc.want)
			}
		})
	}
	// Other errors get no hint.
	ui := cli.NewMockUi()
	(&Meta{UI: ui}).errorf("Error: %v", &api.StatusError{Code: 404, Message: "job not found"})
	if got := ui.ErrorWriter.String(); strings.Count(got, "\n") != 1 {
		t.Fatalf("a 404 got a hint: %q", got)
	}
}
