package agent_test

import (
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// gangJobHCL is a two-member gang whose tasks record their rank variables
// in dir/rank-<RANK>-attempt-<GPULAYER_GANG_ATTEMPT> ("<pid> <RANK>
// <WORLD_SIZE> <LOCAL_RANK> <MASTER_ADDR> <MASTER_PORT> <GPUs>") and then
// become a long sleep with that pid.
const gangJobHCL = `job "gang-e2e" {
  type = "batch"
  group "workers" {
    count = 2
    gang  = true
    task "train" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo $$ $RANK $WORLD_SIZE $LOCAL_RANK $MASTER_ADDR $MASTER_PORT $CUDA_VISIBLE_DEVICES > %s/rank-$RANK-attempt-$GPULAYER_GANG_ATTEMPT.tmp && mv %s/rank-$RANK-attempt-$GPULAYER_GANG_ATTEMPT.tmp %s/rank-$RANK-attempt-$GPULAYER_GANG_ATTEMPT && exec sleep 300"]
      }
      resources {
        cpu    = 100
        memory = 64
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`

// gangMember is what one member wrote.
type gangMember struct {
	pid                    int
	rank, world, localRank int
	master, port, gpus     string
}

// readGang returns the members of an attempt that have started, by rank.
func readGang(t *testing.T, dir string, attempt int) map[int]gangMember {
	t.Helper()
	out := map[int]gangMember{}
	for rank := 0; rank < 2; rank++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d-attempt-%d", rank, attempt)))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) != 7 {
			t.Fatalf("rank %d attempt %d wrote %q", rank, attempt, b)
		}
		var m gangMember
		m.pid, _ = strconv.Atoi(f[0])
		m.rank, _ = strconv.Atoi(f[1])
		m.world, _ = strconv.Atoi(f[2])
		m.localRank, _ = strconv.Atoi(f[3])
		m.master, m.port, m.gpus = f[4], f[5], f[6]
		out[rank] = m
	}
	return out
}

// TestE2EGangRanksAndRestart runs a two-member gang under agent -dev with
// its two simulated GPUs: the members run with ranks 0 and 1, WORLD_SIZE
// 2, one master address and port and distinct GPUs; killing one member's
// process restarts both (the survivor is stopped and a new gang, attempt
// 1, runs both ranks again).
func TestE2EGangRanksAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	if raceEnabled {
		t.Skip("the agent is a separate process the race detector does not watch; the non-race pass runs this")
	}
	a := startDevAgent(t, t.TempDir())
	work := taskWorkDir(t)
	spec := filepath.Join(work, "gang.hcl")
	if err := os.WriteFile(spec, []byte(strings.ReplaceAll(gangJobHCL, "%s", work)), 0o644); err != nil {
		t.Fatal(err)
	}
	// job plan against the real server: both members fit the two GPUs.
	if out, code := a.cli("job", "plan", spec); code != 0 || !strings.Contains(out, "place 2 on") {
		t.Fatalf("job plan exited %d:\n%s", code, out)
	}
	if out, code := a.cli("job", "run", "-detach", spec); code != 0 {
		t.Fatalf("job run exited %d:\n%s\nagent log:\n%s", code, out, a.logText())
	}

	var first map[int]gangMember
	waittest.For(t, 60*time.Second, "both members of attempt 0", func() (bool, string) {
		first = readGang(t, work, 0)
		return len(first) == 2, fmt.Sprintf("%d started", len(first))
	})
	for rank, m := range first {
		if m.rank != rank || m.world != 2 || m.localRank != rank || m.master != "127.0.0.1" || m.port != strconv.Itoa(structs.GangMasterPort("gang-e2e", "workers")) {
			t.Fatalf("rank %d saw %+v", rank, m)
		}
	}
	if first[0].gpus == first[1].gpus {
		t.Fatalf("both members got GPU %s", first[0].gpus)
	}
	var allocs []*api.Allocation
	a.getJSON("/v1/job/gang-e2e/allocations", &allocs)
	if len(allocs) != 2 {
		t.Fatalf("%d allocations, want 2", len(allocs))
	}

	// Kill rank 1: the member fails, the gang restarts whole.
	if err := syscall.Kill(first[1].pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill rank 1 (pid %d): %v", first[1].pid, err)
	}
	var second map[int]gangMember
	waittest.For(t, 90*time.Second, "both members of attempt 1", func() (bool, string) {
		second = readGang(t, work, 1)
		return len(second) == 2, fmt.Sprintf("%d restarted", len(second))
	})
	for rank, m := range second {
		if m.rank != rank || m.world != 2 {
			t.Fatalf("after restart rank %d saw %+v", rank, m)
		}
	}
	// The survivor of attempt 0 was stopped, not left running beside the
	// new gang.
	if err := syscall.Kill(first[0].pid, 0); err == nil {
		waittest.For(t, 10*time.Second, "the old rank 0 to exit", func() (bool, string) {
			return syscall.Kill(first[0].pid, 0) != nil, "still running"
		})
	}
	a.getJSON("/v1/job/gang-e2e/allocations", &allocs)
	var desc []string
	running := 0
	for _, al := range allocs {
		desc = append(desc, fmt.Sprintf("%s %s/%s attempt %d", al.Name, al.DesiredStatus, al.ClientStatus, al.Gang.Attempt))
		if al.DesiredStatus == structs.AllocDesiredStatusRun && !al.ClientTerminalStatus() {
			running++
			if al.Gang.Attempt != 1 || al.Gang.Restarts != 1 {
				t.Errorf("live member %s has gang %+v, want attempt 1 restart 1", al.Name, al.Gang)
			}
		}
	}
	sort.Strings(desc)
	if len(allocs) != 4 || running != 2 {
		t.Fatalf("allocations %v, want 4 with 2 live", desc)
	}
	// A third member cannot fit beside the running gang: plan says why,
	// and once submitted the job queue lists it.
	three := filepath.Join(work, "gang3.hcl")
	src := strings.ReplaceAll(strings.Replace(strings.Replace(gangJobHCL, "count = 2", "count = 3", 1), `job "gang-e2e"`, `job "gang-three"`, 1), "%s", work)
	if err := os.WriteFile(three, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := a.cli("job", "plan", three); code != 2 || !strings.Contains(out, "3 would wait: 1 node: not enough free devices (nvidia/gpu)") {
		t.Fatalf("job plan of a 3-member gang exited %d:\n%s", code, out)
	}
	if out, code := a.cli("job", "run", "-detach", three); code != 0 {
		t.Fatalf("job run: %d %s", code, out)
	}
	waittest.For(t, 30*time.Second, "the 3-member gang in the queue", func() (bool, string) {
		out, _ := a.cli("job", "queue")
		return strings.Contains(out, "gang-three") && strings.Contains(out, "workers: 3"), out
	})
	if out, code := a.cli("job", "stop", "gang-e2e"); code != 0 {
		t.Fatalf("job stop: %d %s", code, out)
	}
}
