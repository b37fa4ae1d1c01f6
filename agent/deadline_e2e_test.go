package agent_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// deadlineJob is a batch job whose task sleeps for a minute under
// max_run_duration = "3s", never restarted in place; reschedule is the
// group's reschedule block.
func deadlineJob(name, reschedule string) string {
	return deadlineJobRun(name, reschedule, 3*time.Second)
}

// deadlineJobRun is deadlineJob with max_run_duration maxRun.
func deadlineJobRun(name, reschedule string, maxRun time.Duration) string {
	return fmt.Sprintf(`job %q {
  type = "batch"
  group "g" {
    max_run_duration = %q
    restart {
      attempts = 0
      mode     = "fail"
    }
    %s
    task "main" {
      driver       = "native"
      kill_timeout = "2s"
      config {
        command = "/bin/sleep"
        args    = ["60"]
      }
      resources {
        cpu    = 100
        memory = 32
      }
    }
  }
}
`, name, maxRun, reschedule)
}

// deadlineEvent returns the task's Deadline Exceeded event and its first
// (Received) event.
func deadlineEvent(t *testing.T, a *api.Allocation) (dl, first *api.TaskEvent) {
	t.Helper()
	ts := a.TaskStates["main"]
	if ts == nil || len(ts.Events) == 0 {
		t.Fatalf("alloc %s has no events for main", a.ID)
	}
	for _, e := range ts.Events {
		if e.Type == structs.TaskEventDeadlineExceeded {
			dl = e
		}
	}
	return dl, ts.Events[0]
}

// checkStoppedAtDeadline checks that the allocation failed at its 3 s
// deadline: a Deadline Exceeded event naming it, at least 3 s after the
// allocation's start and well before the task's 60 s sleep would end.
// The start is not on the wire: it is the Deadline less 3 s, checked to
// fall just before the first event.
func checkStoppedAtDeadline(t *testing.T, a *api.Allocation, logs func() string) {
	t.Helper()
	checkStoppedAfter(t, a, 3*time.Second, logs)
}

// checkStoppedAfter is checkStoppedAtDeadline for a max_run_duration of
// maxRun.
func checkStoppedAfter(t *testing.T, a *api.Allocation, maxRun time.Duration, logs func() string) {
	t.Helper()
	ts := a.TaskStates["main"]
	if a.ClientStatus != api.AllocClientStatusFailed || !ts.Failed || ts.Restarts != 0 {
		t.Fatalf("alloc %s: %s %q failed=%v restarts=%d, want failed at its deadline\n%s", a.ID, a.ClientStatus, a.ClientDescription, ts.Failed, ts.Restarts, logs())
	}
	dl, first := deadlineEvent(t, a)
	if dl == nil || !strings.Contains(dl.DisplayMessage, "max_run_duration of "+maxRun.String()) {
		t.Fatalf("alloc %s: no Deadline Exceeded event naming %s: %+v", a.ID, maxRun, ts.Events)
	}
	// The deadline counts from the allocation's start on the client, just
	// before its first (Received) event: start = Deadline - maxRun.
	start := ts.Deadline.Add(-maxRun).UnixNano()
	if ts.Deadline.IsZero() || start > first.Time || time.Duration(first.Time-start) > 2*time.Second {
		t.Errorf("alloc %s: deadline %s is not %s after its start (received at %d)", a.ID, ts.Deadline, maxRun, first.Time)
	}
	ran := time.Duration(dl.Time - start)
	t.Logf("alloc %s: stopped %s after its start: %s: %s", a.ID[:8], ran, dl.Type, dl.DisplayMessage)
	if ran < maxRun || ran > maxRun+27*time.Second {
		t.Errorf("alloc %s stopped %s after its start, want at least %s and well before 60s", a.ID, ran, maxRun)
	}
	if a.ClientDescription != "Allocation exceeded max_run_duration: task main" {
		t.Errorf("client description %q", a.ClientDescription)
	}
}

// TestE2EMaxRunDuration is issue 12's "must show 4", first half: a batch
// job with max_run_duration = "3s" running `sleep 60` is stopped after
// 3 s with the Deadline Exceeded event, `alloc status` shows it, and the
// failure counts for the reschedule policy: one replacement, which gets
// a deadline of its own.
func TestE2EMaxRunDuration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	a := startDevAgent(t, taskUserDir(t))
	p := filepath.Join(taskWorkDir(t), "deadline.hcl")
	src := deadlineJob("deadline", `reschedule {
      attempts  = 1
      interval  = "1h"
      delay     = "1s"
      unlimited = false
    }`)
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := a.cli("job", "run", "-detach", p); code != 0 {
		t.Fatalf("job run: %d %s", code, out)
	}
	var allocs []*api.Allocation
	waittest.For(t, 60*time.Second, "the allocation and its replacement failed", func() (bool, string) {
		allocs = nil
		if code := a.getJSON("/v1/job/deadline/allocations", &allocs); code != 200 {
			return false, fmt.Sprintf("status %d", code)
		}
		failed := 0
		for _, al := range allocs {
			if al.ClientStatus == api.AllocClientStatusFailed {
				failed++
			}
		}
		return failed == 2, fmt.Sprintf("%d allocations, %d failed", len(allocs), failed)
	})
	var orig, repl *api.Allocation
	for _, stub := range allocs {
		var full api.Allocation
		if code := a.getJSON("/v1/allocation/"+stub.ID, &full); code != 200 {
			t.Fatalf("GET allocation %s: %d", stub.ID, code)
		}
		if full.PreviousAllocation == "" {
			orig = &full
		} else {
			repl = &full
		}
	}
	if orig == nil || repl == nil || repl.PreviousAllocation != orig.ID {
		t.Fatalf("want an allocation and its replacement, got %d allocations", len(allocs))
	}
	checkStoppedAtDeadline(t, orig, a.logText)
	checkStoppedAtDeadline(t, repl, a.logText)
	if !repl.TaskStates["main"].Deadline.After(orig.TaskStates["main"].Deadline) {
		t.Errorf("the replacement's deadline %s is not its own (original's %s)", repl.TaskStates["main"].Deadline, orig.TaskStates["main"].Deadline)
	}
	out, code := a.cli("alloc", "status", orig.ID)
	for _, want := range []string{"Deadline Exceeded", "max_run_duration of 3s", "Max Run Duration", "= 3s", "Allocation exceeded max_run_duration"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("alloc status (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
	// The attempt is spent: no third allocation.
	if code := a.getJSON("/v1/job/deadline/allocations", &allocs); code != 200 || len(allocs) != 2 {
		t.Errorf("%d allocations, want 2 (reschedule attempts = 1)", len(allocs))
	}
}

// TestE2EMaxRunDurationAcrossKill9 is "must show 4", second half: the
// agent is killed with -9 while the task runs and started again; the
// restarted client reattaches to the same process and still stops it at
// the deadline measured from the allocation's first start.
func TestE2EMaxRunDurationAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	a := startDevAgent(t, taskUserDir(t))
	p := filepath.Join(taskWorkDir(t), "deadline.hcl")
	// Longer than the other tests' 3s: the kill must come before the
	// deadline, and on a loaded host the run, the wait for "running" and
	// the kill took over 3s (the first life then stopped the task itself).
	const maxRun = 8 * time.Second
	if err := os.WriteFile(p, []byte(deadlineJobRun("dlkill", "reschedule {\n      attempts = 0\n      unlimited = false\n    }", maxRun)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := a.cli("job", "run", "-detach", p); code != 0 {
		t.Fatalf("job run: %d %s", code, out)
	}
	running := a.waitAllocStatus("dlkill", api.AllocClientStatusRunning)
	details, _, _ := startedDetails(running, "main")
	pid, _ := strconv.Atoi(details["pid"])
	deadline := running.TaskStates["main"].Deadline
	if pid == 0 || deadline.IsZero() {
		t.Fatalf("running task: pid %q deadline %s", details["pid"], deadline)
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("task pid %d died with the agent: %v", pid, err)
	}
	if left := time.Until(deadline); left <= 0 {
		t.Fatalf("the agent was killed %s after the task's deadline: the test's premise (a kill before it) failed; raise maxRun", -left)
	}
	a.start()
	var got *api.Allocation
	waittest.For(t, 60*time.Second, "the reattached task stopped at its deadline", func() (bool, string) {
		got = a.allocByJob("dlkill")
		if got == nil {
			return false, "allocation not listed"
		}
		return got.ClientTerminalStatus(), got.ClientStatus
	})
	checkStoppedAfter(t, got, maxRun, a.logText)
	if _, starts, reattached := startedDetails(got, "main"); starts != 1 || !reattached {
		t.Errorf("%d Started events, reattached %v: want the task reattached, not started again", starts, reattached)
	}
	if d := got.TaskStates["main"].Deadline; !d.Equal(deadline) {
		t.Errorf("deadline after the restart %s, want %s from the first start", d, deadline)
	}
	waittest.For(t, 20*time.Second, "the task's process gone", func() (bool, string) {
		return processGone(pid), fmt.Sprintf("pid %d still runs", pid)
	})
}

// processGone reports whether pid no longer runs (gone, or a zombie
// waiting for its reaper).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) != nil
	}
	// pid (comm) state ...: comm may hold spaces, the state follows the
	// last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestE2EMaxRunDurationBadInput is issue 12's "must show 5": bad
// max_run_duration values are refused with an error naming the field,
// and file:line for HCL; nothing is registered.
func TestE2EMaxRunDurationBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	a := startDevAgent(t, taskUserDir(t))
	dir := t.TempDir()
	hcl := func(jobType, group, task string) string {
		return fmt.Sprintf(`job "bad" {
  type = %q
  group "g" {
    %s
    task "main" {
      driver = "native"
      %s
      config {
        command = "/bin/true"
      }
    }
  }
}
`, jobType, group, task)
	}
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"zero", hcl("batch", `max_run_duration = "0s"`, ""), []string{"bad.hcl:4:24:", "Invalid max_run_duration", `"max_run_duration"`, "above zero"}},
		{"negative on a task", hcl("batch", "", `max_run_duration = "-3s"`), []string{"bad.hcl:7:26:", "Invalid max_run_duration", "got -3s"}},
		{"unparseable", hcl("batch", `max_run_duration = "three seconds"`, ""), []string{"bad.hcl:4:24:", "Invalid duration", `"max_run_duration"`}},
		{"over a year", hcl("batch", `max_run_duration = "9000h"`, ""), []string{"bad.hcl:4:5:", `group "g": max_run_duration: at most 8760h0m0s`}},
		{"service job", hcl("service", `max_run_duration = "1h"`, ""), []string{"bad.hcl:4:5:", `group "g": max_run_duration: only batch jobs may set it`, `"service"`}},
		{"service job task", hcl("service", "", `max_run_duration = "1h"`), []string{"bad.hcl:7:7:", `group "g": task "main": max_run_duration: only batch jobs`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "bad.hcl")
			if err := os.WriteFile(p, []byte(tc.src), 0o600); err != nil {
				t.Fatal(err)
			}
			out, code := a.cli("job", "run", "-detach", p)
			if code == 0 {
				t.Fatalf("job run exited 0:\n%s", out)
			}
			t.Logf("job run: %s", strings.TrimSpace(out))
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	t.Run("JSON negative", func(t *testing.T) {
		body := `{"Job":{"ID":"badjson","Type":"batch","TaskGroups":[{"Name":"g","MaxRunDuration":-1000000000,"Tasks":[{"Name":"t","Driver":"native","Config":{"command":"/bin/true"}}]}]}}`
		req, _ := http.NewRequest(http.MethodPut, a.addr+"/v1/jobs", bytes.NewReader([]byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(b), `group \"g\": max_run_duration: must be more than zero, got -1s`) {
			t.Errorf("PUT /v1/jobs = %d %s, want 400 naming max_run_duration", resp.StatusCode, b)
		}
	})
	var jobs []*api.JobListStub
	a.getJSON("/v1/jobs", &jobs)
	if len(jobs) != 0 {
		t.Errorf("%d jobs registered after refused input", len(jobs))
	}
}
