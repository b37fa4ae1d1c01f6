package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/nomadish/api"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/gpulayer/gpulayer/structs"
)

// Cluster test shape: 4 submitters x 50 submissions over 100 job IDs, so
// each job is written twice, by two submitters at about the same time.
const (
	clusterSubmitters   = 4
	clusterPerSubmitter = 50
	clusterKeys         = 100
	clusterGPUsPerNode  = 4
	// clusterAttempts bounds the tries of one submission (each to a random
	// server); the submission is an error when all fail.
	clusterAttempts = 8
)

// kvInput and kvOutput are the operations of the register-per-job model:
// a write registers job Key with meta value Value; a read GETs job Key
// and sees Value ("" when the job does not exist).
type kvInput struct {
	Write bool
	Key   string
	Value string
}

type kvOutput struct {
	Value string
}

// jobRegisterModel is a register per job ID for porcupine: a write sets the
// register, a read must return its current value. Writes whose outcome is
// unknown (the request failed) are in the history with an open-ended
// return time, so porcupine may order them anywhere after their call, or
// never.
var jobRegisterModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return "" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		in := input.(kvInput)
		if in.Write {
			return true, in.Value
		}
		return output.(kvOutput).Value == state.(string), state
	},
	DescribeOperation: func(input, output interface{}) string {
		in := input.(kvInput)
		if in.Write {
			return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
		}
		return fmt.Sprintf("get(%s) -> %q", in.Key, output.(kvOutput).Value)
	},
}

// history records operations with times from one monotonic clock.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(client int, in kvInput, out kvOutput, call, ret int64) {
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
}

// clusterJob is a service job of count 1 holding one GPU with a task that
// sleeps; its meta "v" carries the written value.
func clusterJob(id, value string) map[string]interface{} {
	return map[string]interface{}{"Job": map[string]interface{}{
		"ID": id, "Name": id, "Type": "service", "Meta": map[string]string{"v": value},
		"TaskGroups": []interface{}{map[string]interface{}{
			"Name": "g", "Count": 1,
			"Tasks": []interface{}{map[string]interface{}{
				"Name": "t", "Driver": "native",
				"Config":    map[string]interface{}{"command": "/bin/sleep", "args": []string{"600"}},
				"Resources": map[string]interface{}{"CPU": 10, "MemoryMB": 8, "Devices": []interface{}{map[string]interface{}{"Name": "nvidia/gpu", "Count": 1}}},
			}},
		}},
	}}
}

// putJob registers a job on p; nil means acknowledged (200).
func (c *testCluster) putJob(p *proc, body []byte) error {
	req, err := http.NewRequest(http.MethodPut, p.url()+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT /v1/jobs on %s: %d %s", p.name, resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

// readJob does a consistent read of job id on p: its meta value, "" when
// the job does not exist.
func (c *testCluster) readJob(p *proc, id string) (string, error) {
	resp, err := c.http.Get(p.url() + "/v1/job/" + id + "?consistent")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		var j struct{ Meta map[string]string }
		if err := json.Unmarshal(b, &j); err != nil {
			return "", err
		}
		return j.Meta["v"], nil
	case http.StatusNotFound:
		return "", nil
	default:
		return "", fmt.Errorf("GET job on %s: %d %s", p.name, resp.StatusCode, bytes.TrimSpace(b))
	}
}

// TestClusterKillLeaderDuringSubmissions is the HA test with real
// processes: three servers and two clients on 127.0.0.1; 200 job
// submissions from 4 concurrent submitters while the leader is killed
// (SIGKILL) and restarted twice. Afterwards every acknowledged job exists
// exactly once, no job has two live allocations, no GPU instance is held
// by two live allocations of a node, every submission ended in an
// acknowledgement or an error, the three FSMs have the same state hash,
// and the history of writes and consistent reads is linearizable
// (porcupine).
func TestClusterKillLeaderDuringSubmissions(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("starts five real agent processes (skipped under -short and -race)")
	}
	c := startCluster(t, 3, 2, clusterGPUsPerNode)
	began := time.Now()
	h := &history{start: time.Now()}

	var (
		acks, errs  atomic.Int64
		throttle    atomic.Bool // slows submitters while a kill is pending
		outcomeMu   sync.Mutex
		acked       = map[string]bool{}
		subErrors   []string
		outcomes    = make([]string, clusterSubmitters*clusterPerSubmitter)
		killTimes   []time.Duration
		killTargets []string
	)
	key := func(i int) string { return fmt.Sprintf("ha-%03d", i) }

	// The chaos goroutine kills the leader once 40, then 110 submissions
	// are acknowledged, and restarts it a second later. Submitters slow
	// down while it waits, so the kill lands while writes are in flight.
	chaosDone := make(chan struct{})
	submittersDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		for _, at := range []int64{40, 110} {
			throttle.Store(true)
			for acks.Load() < at {
				select {
				case <-submittersDone:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
			// The restarted server must be back in the cluster first.
			var leader *proc
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if leader = c.leader(); leader != nil && c.allPeersUp() {
					break
				}
				leader = nil
			}
			if leader == nil {
				return
			}
			killTimes = append(killTimes, time.Since(began))
			killTargets = append(killTargets, leader.name)
			leader.kill()
			throttle.Store(false)
			time.Sleep(time.Second)
			leader.start()
		}
	}()

	var wg sync.WaitGroup
	for g := 0; g < clusterSubmitters; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			for i := 0; i < clusterPerSubmitter; i++ {
				k := key((g%2)*clusterPerSubmitter + i)
				v := fmt.Sprintf("s%d-%d", g, i)
				body, _ := json.Marshal(clusterJob(k, v))
				var lastErr error
				ok := false
				for attempt := 0; attempt < clusterAttempts && !ok; attempt++ {
					if attempt > 0 {
						time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
					}
					p := c.servers[rng.IntN(len(c.servers))]
					call := h.now()
					err := c.putJob(p, body)
					if err == nil {
						h.add(g, kvInput{Write: true, Key: k, Value: v}, kvOutput{}, call, h.now())
						ok = true
						continue
					}
					// Unknown outcome: it may have been applied, at any
					// time after the call.
					h.add(g, kvInput{Write: true, Key: k, Value: v}, kvOutput{}, call, math.MaxInt64)
					lastErr = err
				}
				outcomeMu.Lock()
				if ok {
					acks.Add(1)
					acked[k] = true
					outcomes[g*clusterPerSubmitter+i] = "ack"
				} else {
					errs.Add(1)
					subErrors = append(subErrors, fmt.Sprintf("%s=%s: %v", k, v, lastErr))
					outcomes[g*clusterPerSubmitter+i] = "error"
				}
				outcomeMu.Unlock()

				// A consistent read of a random job at a random server.
				rk := key(rng.IntN(clusterKeys))
				p := c.servers[rng.IntN(len(c.servers))]
				call := h.now()
				if got, err := c.readJob(p, rk); err == nil {
					h.add(g, kvInput{Key: rk}, kvOutput{Value: got}, call, h.now())
				}
				pause := 20 * time.Millisecond
				if throttle.Load() && acks.Load() >= 40 {
					pause = 150 * time.Millisecond
				}
				time.Sleep(pause)
			}
		}()
	}
	wg.Wait()
	close(submittersDone)
	<-chaosDone
	submitTime := time.Since(began)

	if len(killTargets) != 2 {
		t.Fatalf("the leader was killed %d times during the submissions, want 2 (kills at %v)", len(killTargets), killTimes)
	}
	for _, p := range c.servers {
		if !p.alive() {
			p.start()
		}
	}
	c.waitStable(60 * time.Second)

	// Every submission ended one way or the other.
	missing := 0
	for _, o := range outcomes {
		if o == "" {
			missing++
		}
	}
	if missing > 0 || acks.Load()+errs.Load() != clusterSubmitters*clusterPerSubmitter {
		t.Fatalf("%d submissions without an outcome; %d acks + %d errors != %d", missing, acks.Load(), errs.Load(), clusterSubmitters*clusterPerSubmitter)
	}

	t.Logf("%d acks, %d errors in %s; leader kills at %v (%v)", acks.Load(), errs.Load(), submitTime.Round(time.Millisecond), killTimes, killTargets)

	// Final consistent reads of every job join the history.
	leader := c.leader()
	for i := 0; i < clusterKeys; i++ {
		call := h.now()
		got, err := c.readJob(leader, key(i))
		if err != nil {
			t.Fatalf("final read of %s: %v", key(i), err)
		}
		h.add(clusterSubmitters, kvInput{Key: key(i)}, kvOutput{Value: got}, call, h.now())
	}

	// Let the scheduler and clients settle, then the FSMs must agree.
	c.waitAllocsSettled(90 * time.Second)
	hash := c.waitSameState(60 * time.Second)

	// Every acknowledged job exists exactly once on every server.
	for _, p := range c.servers {
		var jobs []struct{ ID string }
		if err := c.get(p, "/v1/jobs", &jobs); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, j := range jobs {
			seen[j.ID]++
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s lists job %s %d times", p.name, id, n)
			}
		}
		for id := range acked {
			if seen[id] != 1 {
				t.Errorf("acknowledged job %s is missing on %s", id, p.name)
			}
		}
	}

	live := c.checkAllocs(t)

	// Both clients kept (or moved) their server connection through the
	// kills: their nodes are ready.
	var nodes []struct{ Name, Status string }
	if err := c.get(c.leader(), "/v1/nodes", &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != len(c.clients) {
		t.Errorf("%d nodes registered, want %d", len(nodes), len(c.clients))
	}
	for _, n := range nodes {
		if n.Status != structs.NodeStatusReady {
			t.Errorf("node %s is %s after the leader kills, want ready", n.Name, n.Status)
		}
	}

	res, info := porcupine.CheckOperationsVerbose(jobRegisterModel, h.ops, 60*time.Second)
	switch res {
	case porcupine.Illegal:
		path := t.TempDir() + "/history.html"
		if err := porcupine.VisualizePath(jobRegisterModel, info, path); err == nil {
			t.Logf("visualization of the history: %s", path)
		}
		t.Errorf("the history of %d operations is not linearizable", len(h.ops))
	case porcupine.Unknown:
		t.Errorf("porcupine could not decide linearizability of %d operations within 60s", len(h.ops))
	}
	t.Logf("%d live allocations; %d operations checked (%s); FSM hash %s; total %s",
		live, len(h.ops), res, hash, time.Since(began).Round(time.Millisecond))
	if len(subErrors) > 0 {
		t.Logf("failed submissions: %s", strings.Join(subErrors, "; "))
	}
}

// allPeersUp reports whether every server process runs and answers
// /v1/status/peers with all servers.
func (c *testCluster) allPeersUp() bool {
	for _, p := range c.servers {
		var peers []string
		if !p.alive() || c.get(p, "/v1/status/peers", &peers) != nil || len(peers) != len(c.servers) {
			return false
		}
		var l string
		if c.get(p, "/v1/status/leader", &l) != nil || l == "" {
			return false
		}
	}
	return true
}

// waitAllocsSettled waits until the leader has no pending evaluation
// work: every evaluation is terminal or blocked, and no allocation is
// pending on its client.
func (c *testCluster) waitAllocsSettled(timeout time.Duration) {
	c.t.Helper()
	waittest.For(c.t, timeout, "evaluations and allocations to settle", func() (bool, string) {
		l := c.leader()
		if l == nil {
			return false, "no leader"
		}
		var self struct {
			Stats struct{ Nomad map[string]interface{} }
		}
		if err := c.get(l, "/v1/agent/self", &self); err != nil {
			return false, err.Error()
		}
		for _, k := range []string{"broker.total_ready", "broker.total_unacked", "plan.queue_depth"} {
			if v := fmt.Sprint(self.Stats.Nomad[k]); v != "0" {
				return false, fmt.Sprintf("%s = %s", k, v)
			}
		}
		var allocs []*api.Allocation
		if err := c.get(l, "/v1/allocations", &allocs); err != nil {
			return false, err.Error()
		}
		for _, a := range allocs {
			if a.DesiredStatus == structs.AllocDesiredStatusRun && a.ClientStatus == structs.AllocClientStatusPending {
				return false, "allocation " + a.ID + " pending"
			}
		}
		return true, ""
	})
}

// checkAllocs fails the test when a job has more than one live
// allocation or a GPU instance is held by two live allocations of one
// node, and returns the number of live allocations.
func (c *testCluster) checkAllocs(t *testing.T) int {
	t.Helper()
	l := c.leader()
	var stubs []*api.Allocation
	if err := c.get(l, "/v1/allocations", &stubs); err != nil {
		t.Fatal(err)
	}
	perJob := map[string][]string{}
	gpuHolder := map[string]string{} // node/instance -> alloc
	live := 0
	for _, s := range stubs {
		if s.DesiredStatus != structs.AllocDesiredStatusRun || s.ClientTerminalStatus() {
			continue
		}
		var a api.Allocation
		if err := c.get(l, "/v1/allocation/"+s.ID, &a); err != nil {
			t.Fatal(err)
		}
		live++
		perJob[a.JobID] = append(perJob[a.JobID], a.ID)
		for _, id := range a.DeviceIDs() {
			k := a.NodeID + "/" + id
			if other, dup := gpuHolder[k]; dup {
				t.Errorf("GPU %s on node %s held by live allocations %s and %s", id, a.NodeID, other, a.ID)
			}
			gpuHolder[k] = a.ID
		}
		if len(a.DeviceIDs()) != 1 {
			t.Errorf("live allocation %s holds GPUs %v, want exactly 1", a.ID, a.DeviceIDs())
		}
	}
	for job, ids := range perJob {
		if len(ids) > 1 {
			t.Errorf("job %s (count 1) has %d live allocations: %v", job, len(ids), ids)
		}
	}
	if max := len(c.clients) * clusterGPUsPerNode; live > max {
		t.Errorf("%d live allocations, but the nodes have only %d GPUs", live, max)
	}
	return live
}

// TestJobRegisterModel checks the porcupine model on hand-made histories:
// a stale read after an acknowledged write is caught, and a failed write
// may or may not have happened.
func TestJobRegisterModel(t *testing.T) {
	w := func(k, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: kvInput{Write: true, Key: k, Value: v}, Output: kvOutput{}, Call: call, Return: ret}
	}
	r := func(k, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 1, Input: kvInput{Key: k}, Output: kvOutput{Value: v}, Call: call, Return: ret}
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"read after write", []porcupine.Operation{w("a", "1", 0, 10), r("a", "1", 20, 30)}, true},
		{"stale read after ack", []porcupine.Operation{w("a", "1", 0, 10), w("a", "2", 11, 15), r("a", "1", 20, 30)}, false},
		{"read of a missing job after ack", []porcupine.Operation{w("a", "1", 0, 10), r("a", "", 20, 30)}, false},
		{"concurrent read sees either", []porcupine.Operation{w("a", "1", 0, 10), w("a", "2", 5, 30), r("a", "1", 12, 20)}, true},
		{"failed write later visible", []porcupine.Operation{w("a", "1", 0, math.MaxInt64), r("a", "", 5, 6), r("a", "1", 20, 30)}, true},
		{"failed write never visible", []porcupine.Operation{w("a", "1", 0, math.MaxInt64), r("a", "", 20, 30)}, true},
		{"value flips back", []porcupine.Operation{w("a", "1", 0, 10), w("a", "2", 0, 10), r("a", "1", 20, 21), r("a", "2", 22, 23), r("a", "1", 24, 25)}, false},
		{"keys are independent", []porcupine.Operation{w("a", "1", 0, 10), w("b", "2", 0, 10), r("b", "2", 20, 21), r("a", "1", 22, 23)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(jobRegisterModel, tc.ops); got != tc.want {
				t.Errorf("linearizable = %v, want %v", got, tc.want)
			}
		})
	}
}
