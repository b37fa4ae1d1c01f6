package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

const goodJob = `variable "count" {
  type    = number
  default = 1
}

job "hello-gpu" {
  type = "batch"
  group "gpu" {
    count = var.count
    task "main" {
      driver = "native"
      config {
        command = "nvidia-smi"
      }
      resources {
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestJobRunMonitor(t *testing.T) {
	f := newFakeAPI()
	const evalID = "1a2b3c4d-0000-0000-0000-000000000000"
	f.registerEval = evalID
	pending := &api.Evaluation{ID: evalID, JobID: "hello-gpu", Status: "pending"}
	done := &api.Evaluation{ID: evalID, JobID: "hello-gpu", Status: "complete"}
	f.evalSteps[evalID] = []*api.Evaluation{pending, pending, done}
	ts := f.serve(t)
	path := writeFile(t, "job.hcl", goodJob)
	r := runCmd(t, ts.URL, "job", "run", "-var", "count=2", path)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	golden(t, "job_run.golden", r.out)
	if f.registered == nil || f.registered.TaskGroups[0].Count != 2 {
		t.Fatalf("registered %+v, want count 2 from -var", f.registered)
	}
}

func TestJobRunPlacementFailed(t *testing.T) {
	f := newFakeAPI()
	const evalID = "2b2b2b2b-0000-0000-0000-000000000000"
	f.registerEval = evalID
	f.evalSteps[evalID] = []*api.Evaluation{{
		ID: evalID, JobID: "hello-gpu", Status: "complete", BlockedEval: "3c3c3c3c-0000",
		FailedTGAllocs: map[string]*api.AllocMetric{"gpu": {
			NodesEvaluated: 2, NodesFiltered: 1, NodesExhausted: 1, CoalescedFailures: 1,
			ConstraintFiltered: map[string]int{"${attr.kernel.name} = windows": 1},
			DimensionExhausted: map[string]int{"devices: nvidia/gpu": 1},
		}},
	}}
	ts := f.serve(t)
	r := runCmd(t, ts.URL, "job", "run", writeFile(t, "job.hcl", goodJob))
	if r.code != 2 {
		t.Fatalf("exit %d, want 2: %s", r.code, r.err)
	}
	golden(t, "job_run_failed.golden", r.out)
}

func TestJobRunDetachAndVarFile(t *testing.T) {
	f := newFakeAPI()
	f.registerEval = "9e9e9e9e-0000"
	ts := f.serve(t)
	varFile := writeFile(t, "vars.hcl", "count = 3\n")
	r := runCmd(t, ts.URL, "job", "run", "-detach", "-var-file", varFile, writeFile(t, "job.hcl", goodJob))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if !strings.Contains(r.out, "Job registration successful") || !strings.Contains(r.out, "Evaluation ID: 9e9e9e9e-0000") {
		t.Errorf("out %q", r.out)
	}
	if f.registered == nil || f.registered.TaskGroups[0].Count != 3 {
		t.Fatalf("registered %+v, want count 3 from the var file", f.registered)
	}
}

func TestJobRunBadHCL(t *testing.T) {
	f := newFakeAPI()
	ts := f.serve(t)
	cases := []struct {
		name, src, want string
	}{
		{"syntax", "job \"x\" {\n  group \"g\" {\n    count = \n  }\n}\n", "job.hcl:3:"},
		{"unknown attribute", "job \"x\" {\n  colour = \"red\"\n}\n", "job.hcl:2:3:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, ts.URL, "job", "run", writeFile(t, "job.hcl", tc.src))
			if r.code != 1 {
				t.Fatalf("exit %d, want 1", r.code)
			}
			if !strings.Contains(r.err, tc.want) {
				t.Errorf("stderr %q lacks %q", r.err, tc.want)
			}
		})
	}
	r := runCmd(t, ts.URL, "job", "run", filepath.Join(t.TempDir(), "missing.hcl"))
	if r.code != 1 || !strings.Contains(r.err, "missing.hcl") {
		t.Fatalf("missing file: exit %d err %q", r.code, r.err)
	}
	if n := f.requestCount(); n != 0 {
		t.Fatalf("%d requests made for bad jobspecs, want 0", n)
	}
}

func TestJobStop(t *testing.T) {
	f := newFakeAPI()
	const evalID = "5e5e5e5e-0000"
	f.registerEval = evalID
	f.evalSteps[evalID] = []*api.Evaluation{{ID: evalID, JobID: "hello-gpu", Status: "complete"}}
	ts := f.serve(t)
	r := runCmd(t, ts.URL, "job", "stop", "-purge", "hello")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if !f.purged {
		t.Error("purge not sent")
	}
	if !strings.Contains(r.out, `Evaluation "5e5e5e5e" finished with status "complete"`) {
		t.Errorf("out %q", r.out)
	}
	r = runCmd(t, ts.URL, "job", "stop", "-detach", "hello-gpu")
	if r.code != 0 || !strings.Contains(r.out, `Job "hello-gpu" stopped`) {
		t.Fatalf("detach: exit %d out %q err %q", r.code, r.out, r.err)
	}
}

func TestAllocLogs(t *testing.T) {
	ts := newFakeAPI().serve(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"alloc", "logs", "abcd1234"}, "hello from the GPU\n"},
		{[]string{"alloc", "logs", "-stderr", "abcd1234", "main"}, "a warning\n"},
		{[]string{"alloc", "logs", "-job", "hello-gpu"}, "hello from the GPU\n"},
		{[]string{"alloc", "logs", "-job", "hello-gpu", "main"}, "hello from the GPU\n"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCmd(t, ts.URL, tc.args...)
			if r.code != 0 || r.stdout != tc.want {
				t.Fatalf("exit %d stdout %q err %q; want %q", r.code, r.stdout, r.err, tc.want)
			}
		})
	}
	r := runCmd(t, ts.URL, "alloc", "logs", "abcd1234", "other")
	if r.code != 1 || !strings.Contains(r.err, "404") {
		t.Fatalf("unknown task: exit %d err %q", r.code, r.err)
	}
	r = runCmd(t, ts.URL, "alloc", "logs", "-job", "hello-gpu", "other")
	if r.code != 1 || !strings.Contains(r.err, `no task "other"`) {
		t.Fatalf("-job with unknown task: exit %d err %q", r.code, r.err)
	}
}

// TestAllocLogsFollowEnd checks how alloc logs -f ends: 0 when the task
// has finished, 1 with a note on stderr when the stream ended while the
// task still runs or the agent no longer answers.
func TestAllocLogsFollowEnd(t *testing.T) {
	const allocID = "abcd1234-5678-90ab-cdef-111111111111"
	cases := []struct {
		name     string
		setup    func(f *fakeAPI)
		wantCode int
		wantErr  string
	}{
		{"task finished", func(f *fakeAPI) {
			a := *f.allocs[allocID]
			a.ClientStatus = "complete"
			a.TaskStates = map[string]*api.TaskState{"main": {State: "dead"}}
			f.allocs[allocID] = &a
		}, 0, ""},
		{"task dead, alloc not yet complete", func(f *fakeAPI) {
			a := *f.allocs[allocID]
			a.TaskStates = map[string]*api.TaskState{"main": {State: "dead", Failed: true}}
			f.allocs[allocID] = &a
		}, 0, ""},
		{"task still running", func(f *fakeAPI) {}, 1,
			`Log stream of task "main" ended while the task is still running: the agent may have stopped or restarted`},
		{"agent gone", func(f *fakeAPI) { f.downAfterLogs = true }, 1,
			`Log stream of task "main" ended, and allocation "abcd1234" cannot be read`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI()
			tc.setup(f)
			ts := f.serve(t)
			r := runCmd(t, ts.URL, "alloc", "logs", "-f", "abcd1234", "main")
			if r.stdout != "hello from the GPU\n" {
				t.Errorf("stdout %q", r.stdout)
			}
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d; err %q", r.code, tc.wantCode, r.err)
			}
			if tc.wantErr == "" && r.err != "" || !strings.Contains(r.err, tc.wantErr) {
				t.Errorf("stderr %q, want %q", r.err, tc.wantErr)
			}
		})
	}
}

func TestJobStatusShowsWhyQueued(t *testing.T) {
	f := newFakeAPI()
	f.jobEvals["hello-gpu"] = append(f.jobEvals["hello-gpu"], &api.Evaluation{
		ID: "b10c4ed0-0000-0000-0000-000000000000", JobID: "hello-gpu", Status: "blocked", CreateIndex: 11,
		FailedTGAllocs: map[string]*api.AllocMetric{"gpu": {NodesEvaluated: 1, NodesExhausted: 1,
			DimensionExhausted: map[string]int{"devices: nvidia/gpu": 1}}},
	})
	ts := f.serve(t)
	r := runCmd(t, ts.URL, "job", "status", "hello-gpu")
	for _, want := range []string{"Placement Failure", `Task Group "gpu":`, `Dimension "devices: nvidia/gpu" exhausted on 1 nodes`} {
		if !strings.Contains(r.out, want) {
			t.Errorf("job status output lacks %q:\n%s", want, r.out)
		}
	}
}

func TestEmptyIDsAreRefused(t *testing.T) {
	f := newFakeAPI()
	ts := f.serve(t)
	for _, args := range [][]string{{"job", "stop", ""}, {"alloc", "status", ""}, {"alloc", "logs", " "}} {
		r := runCmd(t, ts.URL, args...)
		if r.code != 1 || !strings.Contains(r.err, "must not be empty") {
			t.Errorf("%q: exit %d err %q", args, r.code, r.err)
		}
	}
	if n := f.requestCount(); n != 0 {
		t.Errorf("%d requests were sent for empty IDs", n)
	}
}
