package client

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/structs"
)

func TestAllocExecSignalRestart(t *testing.T) {
	srv := clienttest.NewServer()
	c := newTestClient(t, srv, "", nil)
	ids := gpuIDs(c.Node())
	a := clienttest.NativeAlloc(c.Node().ID, structs.JobTypeService, "/bin/sh",
		[]string{"-c", `trap 'echo got HUP' HUP; echo started; while :; do sleep 0.05; done`}, ids[:1])
	srv.UpsertAlloc(a)
	srv.WaitForAlloc(t, a.ID, 15*time.Second, running)
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		out := readLogs(t, c, a.ID, "stdout")
		return strings.Contains(out, "started"), out
	})
	ctx := context.Background()

	var out bytes.Buffer
	code, err := c.AllocExec(ctx, a.ID, "", []string{"env"}, false, nil, &out, &out)
	if err != nil || code != 0 {
		t.Fatalf("exec env: %d %v", code, err)
	}
	for _, want := range []string{"CUDA_VISIBLE_DEVICES=" + ids[0], "NVIDIA_VISIBLE_DEVICES=" + ids[0], "GPULAYER_GPU_COUNT=1", "GPULAYER_ALLOC_ID=" + a.ID} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("exec env output lacks %q:\n%s", want, out.String())
		}
	}
	if code, _ := c.AllocExec(ctx, a.ID, "", []string{"sh", "-c", "exit 5"}, false, nil, nil, nil); code != 5 {
		t.Fatalf("exec exit code %d, want 5", code)
	}

	if err := c.AllocSignal(ctx, a.ID, "main", "HUP"); err != nil {
		t.Fatal(err)
	}
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		out := readLogs(t, c, a.ID, "stdout")
		return strings.Contains(out, "got HUP"), out
	})

	if err := c.AllocRestart(ctx, a.ID, ""); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitForAlloc(t, a.ID, 15*time.Second, func(al *structs.Allocation) bool {
		ts := al.TaskStates["main"]
		return ts != nil && ts.Restarts == 1 && ts.State == structs.TaskStateRunning
	})
	if e := eventOf(got, "main", structs.TaskEventRestarting); e == nil || !strings.Contains(e.DisplayMessage, "requested by user") {
		t.Fatalf("restart event %+v", e)
	}
	clienttest.WaitFor(t, 10*time.Second, func() (bool, string) {
		out := readLogs(t, c, a.ID, "stdout")
		return strings.Count(out, "started") == 2, out
	})

	errCases := []struct {
		name string
		err  error
		want error
	}{
		{"exec unknown alloc", func() error {
			_, err := c.AllocExec(ctx, "nope", "", []string{"env"}, false, nil, nil, nil)
			return err
		}(), structs.ErrNotFound},
		{"exec unknown task", func() error {
			_, err := c.AllocExec(ctx, a.ID, "other", []string{"env"}, false, nil, nil, nil)
			return err
		}(), structs.ErrNotFound},
		{"exec empty command", func() error {
			_, err := c.AllocExec(ctx, a.ID, "", nil, false, nil, nil, nil)
			return err
		}(), structs.ErrInvalid},
		{"unknown signal", c.AllocSignal(ctx, a.ID, "", "SIGNOPE"), structs.ErrInvalid},
		{"restart unknown alloc", c.AllocRestart(ctx, "../x", ""), structs.ErrNotFound},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("error %v, want %v", tc.err, tc.want)
			}
		})
	}
}
