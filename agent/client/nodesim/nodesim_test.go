package nodesim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/nodesim"
	agenthttp "github.com/gpulayer/gpulayer/agent/http"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/server/servertest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestFleetRunsAllocationsThroughTheAPI starts a real server behind the
// real HTTP handler and a fleet of 5 simulated nodes of 2 GPUs, with the
// change routes and with the full poll: a job of 8 one-GPU allocations is
// placed on them, every allocation is acknowledged running and then
// complete through the API, the servers record them complete, and no GPU
// was given twice.
func TestFleetRunsAllocationsThroughTheAPI(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full_poll=%v", full), func(t *testing.T) {
			s := servertest.NewServer(t)
			h, err := agenthttp.New(agenthttp.Config{Server: s})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(h)
			t.Cleanup(ts.Close)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fleet, err := nodesim.Start(ctx, nodesim.Config{Servers: []string{ts.Listener.Addr().String()}, Nodes: 5, GPUs: 2, FullPoll: full})
			if err != nil {
				t.Fatal(err)
			}
			defer fleet.Stop()
			nodes, _, err := s.NodeList(ctx, nil)
			if err != nil || len(nodes) != 5 {
				t.Fatalf("%d nodes registered (%v)", len(nodes), err)
			}
			job := statetest.BatchJob(1)
			job.TaskGroups[0].Count = 8
			if _, err := s.JobRegister(ctx, job); err != nil {
				t.Fatal(err)
			}
			waittest.For(t, 30*time.Second, "8 allocations acknowledged and completed", func() (bool, string) {
				st := fleet.Stats()
				return st.Acked == 8 && st.Completed == 8, fmt.Sprintf("%+v", st)
			})
			waittest.NoErr(t, 10*time.Second, "the servers record them complete", func() (bool, error) {
				allocs, _, err := s.JobAllocations(ctx, job.ID, nil)
				done := 0
				for _, a := range allocs {
					if a.ClientStatus == structs.AllocClientStatusComplete && a.TaskStates["server"] != nil {
						done++
					}
				}
				return done == 8, err
			})
			if st := fleet.Stats(); st.GPUConflicts != 0 || st.Registered != 5 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestStartRefusesBadConfig: every bound names its field.
func TestStartRefusesBadConfig(t *testing.T) {
	for _, cfg := range []nodesim.Config{
		{Nodes: 1},
		{Servers: []string{"127.0.0.1:1"}, Nodes: 0},
		{Servers: []string{"127.0.0.1:1"}, Nodes: 100001},
		{Servers: []string{"127.0.0.1:1"}, Nodes: 1, GPUs: 65},
		{Servers: []string{"not an address"}, Nodes: 1},
	} {
		if _, err := nodesim.Start(context.Background(), cfg); !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("Start(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
}
