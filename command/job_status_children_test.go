package command

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// TestJobStatusParentBlockAligned: a periodic job's settings are part of
// the job's "Key = Value" block, their = signs in the same column as the
// job's (they were a second block with its own column), followed by the
// children.
func TestJobStatusParentBlockAligned(t *testing.T) {
	f := newFakeAPI()
	const t0 = int64(1764504000) * 1e9 // 2025-11-30T12:00:00Z
	f.jobs["nightly"] = &api.Job{ID: "nightly", Name: "nightly", Type: "batch", Priority: 50, Datacenters: []string{"dc1"},
		Status: "running", SubmitTime: t0, MaxRunningChildren: 2,
		Periodic: &api.PeriodicConfig{Specs: []string{"0 3 * * *"}, ProhibitOverlap: true}}
	f.jobs["nightly/periodic-1764558000"] = &api.Job{ID: "nightly/periodic-1764558000", ParentID: "nightly",
		Type: "batch", Status: "dead", SubmitTime: t0 + 54000e9}
	r := runCmd(t, f.serve(t).URL, "job", "status", "nightly")
	want := "" +
		"ID                   = nightly\n" +
		"Name                 = nightly\n" +
		"Type                 = batch\n" +
		"Priority             = 50\n" +
		"Datacenters          = dc1\n" +
		"Status               = running\n" +
		"Submit Date          = 2025-11-30T12:00:00Z\n" +
		"Periodic             = 0 3 * * *\n" +
		"Enabled              = true\n" +
		"Prohibit Overlap     = true\n" +
		"Max Running Children = 2\n" +
		"\n" +
		"Children Job Summary\n" +
		"Held  Pending  Running  Dead\n" +
		"0     0        0        1\n" +
		"\n" +
		"Previously Launched Jobs\n" +
		"ID                           Status  Submit Date\n" +
		"nightly/periodic-1764558000  dead    2025-12-01T03:00:00Z\n"
	if r.code != 0 || !strings.HasPrefix(r.out, want) {
		t.Fatalf("exit %d, output:\n%s%s\nwant:\n%s", r.code, r.out, r.err, want)
	}
}

// TestJobDispatchNoEvalSaysWhy: a dispatch answered without an
// evaluation says which of the two reasons it was, from the child's
// state: held behind max_running_children, or an existing child named by
// the idempotency token (the message named both, so the user could not
// tell).
func TestJobDispatchNoEvalSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		held      bool
		want, not string
	}{
		{"held", true, `Held: job "render" already runs its max_running_children; this child starts when one of them finishes (gpulayer job status render lists them)`, "idempotency"},
		{"existing", false, "No evaluation: the idempotency token names this existing child (status running); nothing new was dispatched", "Held"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI()
			f.jobs["render"] = &api.Job{ID: "render", Type: "batch", Status: "running", MaxRunningChildren: 1,
				ParameterizedJob: &api.ParameterizedJobConfig{Payload: "optional"}}
			child := "render/dispatch-1764504000-0123abcd"
			status := "running"
			if tc.held {
				status = "pending"
			}
			f.jobs[child] = &api.Job{ID: child, ParentID: "render", Type: "batch", Status: status, Held: tc.held, Dispatched: true}
			f.dispatchChild = child
			r := runCmd(t, f.serve(t).URL, "job", "dispatch", "-idempotency-token", "t1", "render")
			if r.code != 0 || !strings.Contains(r.out, "Dispatched Job ID = "+child) || !strings.Contains(r.out, tc.want) || strings.Contains(r.out, tc.not) {
				t.Fatalf("exit %d, output:\n%s%s\nwant it to contain %q and not %q", r.code, r.out, r.err, tc.want, tc.not)
			}
		})
	}
}

// TestJobRunParentSaysWhatLaunches: registering a periodic or
// parameterized job (no evaluation to monitor) says what launches its
// children and how to start one, instead of only "Job registration
// successful".
func TestJobRunParentSaysWhatLaunches(t *testing.T) {
	for _, tc := range []struct{ name, block, want string }{
		{"periodic", "periodic {\n    crons = [\"0 3 * * *\"]\n    time_zone = \"Europe/Berlin\"\n  }",
			"Periodic job: a child is launched at each time of 0 3 * * * (Europe/Berlin); `gpulayer job periodic force p` launches one now, `gpulayer job status p` lists them"},
		{"disabled", "periodic {\n    cron = \"@daily\"\n    enabled = false\n  }",
			"Periodic job, disabled (enabled = false): no child is launched on schedule; `gpulayer job periodic force p` launches one now"},
		{"parameterized", "parameterized {\n    payload = \"optional\"\n  }",
			"Parameterized job: nothing runs until `gpulayer job dispatch p` creates a child; `gpulayer job status p` lists them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI() // registerEval "": a parent gets no evaluation
			src := "job \"p\" {\n  type = \"batch\"\n  " + tc.block + "\n  group \"g\" {\n    task \"t\" {\n      driver = \"native\"\n      config {\n        command = \"/bin/true\"\n      }\n    }\n  }\n}\n"
			r := runCmd(t, f.serve(t).URL, "job", "run", writeFile(t, "p.hcl", src))
			if r.code != 0 || !strings.Contains(r.out, "Job registration successful\n"+tc.want) {
				t.Fatalf("exit %d, output:\n%s%s\nwant it to contain %q", r.code, r.out, r.err, tc.want)
			}
		})
	}
}
