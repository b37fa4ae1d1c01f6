package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
	"github.com/gpulayer/gpulayer/nomadish/api"
)

func TestJobRunProgress(t *testing.T) {
	f := newFakeAPI()
	const evalID = "1a2b3c4d-0000-0000-0000-000000000000"
	f.registerEval = evalID
	f.evalSteps[evalID] = []*api.Evaluation{{ID: evalID, JobID: "hello-gpu", Status: "complete"}}
	ts := f.serve(t)
	r := runCmd(t, ts.URL, "job", "run", "-progress", writeFile(t, "job.hcl", goodJob))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	for _, want := range []string{
		"Waiting for tasks to start",
		`Allocation "abcd1234" task "main" on node "laptop": new -> running`,
		"Every task has started",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	// Without -progress (and no terminal) the output stops at placement.
	plain := runCmd(t, ts.URL, "job", "run", writeFile(t, "job.hcl", goodJob))
	if strings.Contains(plain.out, "Waiting for tasks") {
		t.Errorf("progress shown without -progress:\n%s", plain.out)
	}
}

func TestProgressRows(t *testing.T) {
	failed := &api.Allocation{ID: "ffff0000-1111", Name: "j.g[0]", TaskGroup: "g", NodeName: "n1", ClientStatus: "failed",
		TaskStates: map[string]*api.TaskState{"main": {State: "dead", Failed: true, Restarts: 2}}}
	pending := &api.Allocation{ID: "eeee0000-1111", Name: "j.g[1]", TaskGroup: "g", NodeID: "node-abcdef123", ClientStatus: "pending"}
	rows, done, bad := progressRows([]*api.Allocation{failed})
	if !done || !bad || rows[0].state != "dead (failed)" || rows[0].restarts != "2" || rows[0].gpus != "<none>" {
		t.Fatalf("failed alloc: %+v done=%v failed=%v", rows, done, bad)
	}
	if _, done, _ := progressRows([]*api.Allocation{failed, pending}); done {
		t.Fatal("a pending allocation without task states counts as started")
	}
	stopped := *pending
	stopped.DesiredStatus = api.AllocDesiredStatusStop
	if _, done, _ := progressRows([]*api.Allocation{&stopped}); !done {
		t.Fatal("a pending allocation that is being stopped is still waited for")
	}
}

// TestJobRunProgressNothingToWaitFor runs job run -progress where the
// evaluation completes without allocations to start: none placed (a group
// of count 0), or all of them being stopped. Each must return 0 after the
// evaluation instead of waiting for tasks until the progress deadline.
func TestJobRunProgressNothingToWaitFor(t *testing.T) {
	const evalID = "2b3c4d5e-0000-0000-0000-000000000000"
	cases := []struct {
		name   string
		allocs func(f *fakeAPI)
		want   string
	}{
		{"none placed", func(f *fakeAPI) {}, `Evaluation "2b3c4d5e" has no allocations: no tasks to wait for`},
		{"all stopping", func(f *fakeAPI) {
			f.allocs["cccc0000-0000"] = &api.Allocation{ID: "cccc0000-0000", EvalID: evalID, Name: "hello-gpu.gpu[0]",
				JobID: "hello-gpu", TaskGroup: "gpu", DesiredStatus: api.AllocDesiredStatusStop, ClientStatus: "pending"}
		}, `Every allocation of evaluation "2b3c4d5e" is being stopped: no tasks to wait for`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI()
			f.registerEval = evalID
			f.evalSteps[evalID] = []*api.Evaluation{{ID: evalID, JobID: "hello-gpu", Status: "complete", QueuedAllocations: map[string]int{"gpu": 0}}}
			tc.allocs(f)
			ts := f.serve(t)
			r := runCmd(t, ts.URL, "job", "run", "-progress", writeFile(t, "job.hcl", goodJob))
			if r.code != 0 {
				t.Fatalf("exit %d: out %q err %q", r.code, r.out, r.err)
			}
			if !strings.Contains(r.out, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, r.out)
			}
			if strings.Contains(r.out, "Waiting for tasks to start") {
				t.Errorf("waits for tasks although there are none to start:\n%s", r.out)
			}
		})
	}
}

// TestTerminal checks that only a real terminal turns progress on: a pty
// counts, while /dev/null (a character device), a regular file and a pipe
// do not.
func TestTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty on this host: %v", err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devNull.Close() })
	regular, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { regular.Close() })
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close(); pw.Close() })

	cases := []struct {
		name string
		f    *os.File
		want bool
	}{
		{"pty", tty, true},
		{"dev null", devNull, false},
		{"regular file", regular, false},
		{"pipe", pw, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := isTerminal(tc.f); got != tc.want {
				t.Errorf("isTerminal = %v, want %v", got, tc.want)
			}
			// terminal() looks at the process's stdout.
			saved := os.Stdout
			os.Stdout = tc.f
			defer func() { os.Stdout = saved }()
			m := &Meta{Stdout: tc.f}
			if got := m.terminal(); got != tc.want {
				t.Errorf("terminal() with stdout on %s = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}
