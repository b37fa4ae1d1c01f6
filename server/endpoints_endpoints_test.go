package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/raft"
)

// endpointFleet is a leader with endpoint jobs whose members were placed
// (and their router admission set) straight through Raft, as the
// scheduler and the client would: the client part that reports
// EndpointMember is built elsewhere.
type endpointFleet struct {
	s         *Server
	cont, opp *structs.Node
	jobs      map[string]*structs.Job
	allocs    map[string][]*structs.Allocation
}

func newEndpointFleet(t *testing.T) *endpointFleet {
	t.Helper()
	_, trans := raft.NewInmemTransport("")
	s, err := NewServer(&Config{DataDir: t.TempDir(), NodeName: "s1", Transport: trans, DevMode: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	waittest.For(t, 30*time.Second, "leader ready for writes", func() (bool, string) {
		err := s.readyForWrites()
		return err == nil, fmt.Sprint(err)
	})
	f := &endpointFleet{s: s, cont: statetest.Node(0), opp: statetest.Node(0), jobs: map[string]*structs.Job{}, allocs: map[string][]*structs.Allocation{}}
	f.cont.Name, f.opp.Name = "gpu-box", "laptop"
	f.opp.Availability = structs.AvailabilityOpportunistic
	for _, n := range []*structs.Node{f.cont, f.opp} {
		f.apply(t, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
	}
	// llm-a: 2 members on the continuous node, one admitted; llm-b: 2,
	// both admitted; llm-opp: on the opportunistic node; llm-idle: none
	// placed.
	var placed []*structs.Allocation
	for _, name := range []string{"llm-a", "llm-b", "llm-opp", "llm-idle"} {
		job := statetest.Job()
		job.ID = name + "-job"
		tg := job.TaskGroups[0]
		tg.Count = 2
		tg.Networks = []*structs.NetworkResource{{DynamicPorts: []structs.Port{{Label: "http"}}}}
		tg.Endpoint = &structs.Endpoint{Name: name, Port: 9000, Model: "llama-70b", Revision: "r1"}
		node := f.cont
		if name == "llm-opp" {
			tg.Availability = structs.AvailabilityOpportunistic
			node = f.opp
		}
		f.apply(t, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
		f.jobs[name] = job
		if name == "llm-idle" {
			continue
		}
		for i := range 2 {
			a := statetest.Alloc(job, node)
			a.Name = structs.AllocName(job.ID, tg.Name, 1-i) // stored out of index order
			a.ClientStatus = structs.AllocClientStatusRunning
			admitted := name == "llm-b" || i == 0
			a.EndpointMember = &structs.EndpointMemberStatus{Admitted: admitted,
				Identity: structs.EndpointIdentity{JobVersion: job.Version, ArtifactDigest: "sha256:aa", ConfigDigest: "sha256:cc"}}
			if !admitted {
				a.EndpointMember.Reason = `model "llama-70b" not listed by /v1/models`
			}
			placed = append(placed, a)
			f.allocs[name] = append(f.allocs[name], a)
		}
	}
	f.apply(t, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{AllocsPlaced: placed, UpdatedAt: time.Now().UnixNano()})
	return f
}

func (f *endpointFleet) apply(t *testing.T, mt structs.MessageType, msg interface{}) {
	t.Helper()
	if _, _, err := f.s.raftApply(mt, msg); err != nil {
		t.Fatalf("%s: %v", mt, err)
	}
}

func endpointCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func viewsByName(vs []*structs.EndpointView) map[string]*structs.EndpointView {
	out := map[string]*structs.EndpointView{}
	for _, v := range vs {
		out[v.Name] = v
	}
	return out
}

// TestEndpointFleetView checks what /v1/endpoints answers with: members,
// admitted counts, node, version and status per endpoint, members by
// index with their reasons, and a prefix filter.
func TestEndpointFleetView(t *testing.T) {
	f := newEndpointFleet(t)
	ctx := endpointCtx(t)
	list, meta, err := f.s.EndpointList(ctx, "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Index == 0 || len(list) != 4 {
		t.Fatalf("index %d, %d endpoints", meta.Index, len(list))
	}
	by := viewsByName(list)
	a := by["llm-a"]
	if a.Status != structs.EndpointStatusServing || a.Members != 2 || a.Admitted != 1 || a.Count != 2 || a.NodeID != f.cont.ID ||
		a.NodeName != "gpu-box" || a.NodeAvailability != structs.AvailabilityContinuous || a.JobID != "llm-a-job" ||
		a.Model != "llama-70b" || a.Revision != "r1" || a.Port != 9000 || a.Group != "web" {
		t.Fatalf("llm-a = %+v", a)
	}
	if a.MemberList[0].Index != 0 || a.MemberList[1].Index != 1 || a.MemberList[0].Admitted == a.MemberList[1].Admitted {
		t.Fatalf("llm-a members = %+v %+v", a.MemberList[0], a.MemberList[1])
	}
	for _, m := range a.MemberList {
		if !m.Admitted && m.Reason == "" || m.Identity.ArtifactDigest != "sha256:aa" {
			t.Fatalf("member %+v", m)
		}
	}
	if b := by["llm-b"]; b.Admitted != 2 || b.Status != structs.EndpointStatusServing {
		t.Fatalf("llm-b = %+v", b)
	}
	if o := by["llm-opp"]; o.NodeAvailability != structs.AvailabilityOpportunistic || o.NodeName != "laptop" {
		t.Fatalf("llm-opp = %+v", o)
	}
	if i := by["llm-idle"]; i.Status != structs.EndpointStatusDown || i.Members != 0 || i.NodeID != "" {
		t.Fatalf("llm-idle = %+v", i)
	}
	if other, _, _ := f.s.EndpointList(ctx, "prod", nil); len(other) != 0 {
		t.Fatalf("namespace prod lists %d endpoints", len(other))
	}
	if pre, _, _ := f.s.EndpointList(ctx, AllNamespaces, &structs.QueryOptions{Prefix: "llm-o"}); len(pre) != 1 || pre[0].Name != "llm-opp" {
		t.Fatalf("prefix llm-o = %v", pre)
	}
}

// TestEndpointAliasPromotion: promotion refused on an opportunistic node
// (issue 14, Must show 4), for an endpoint without placed members and
// for one no live job declares; who and when are kept; a name resolves
// through its alias; demotion; and a stopped job's endpoint shows
// stopped.
func TestEndpointAliasPromotion(t *testing.T) {
	f := newEndpointFleet(t)
	ctx := endpointCtx(t)
	refusals := []struct {
		name, alias, endpoint string
		want                  error
	}{
		{"opportunistic node", "llm.primary", "llm-opp", structs.ErrEndpointOpportunistic},
		{"no placed member", "llm.primary", "llm-idle", structs.ErrEndpointNotPlaced},
		{"unknown endpoint", "llm.primary", "llm-zzz", structs.ErrNotFound},
		{"bad alias", "LLM.primary", "llm-a", structs.ErrInvalid},
		{"bad endpoint", "llm.primary", "llm a", structs.ErrInvalid},
		{"alias too long", string(make([]byte, 64)), "llm-a", structs.ErrInvalid},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			_, _, err := f.s.EndpointAliasPromote(ctx, &structs.EndpointAliasPromoteArgs{Alias: r.alias, Endpoint: r.endpoint})
			if !errors.Is(err, r.want) {
				t.Fatalf("err = %v, want %v", err, r.want)
			}
			if as, _, _ := f.s.EndpointAliasList(ctx, AllNamespaces, nil); len(as) != 0 {
				t.Fatalf("a refused promotion stored %v", as)
			}
		})
	}
	// The refusal names the node and says why.
	if _, _, err := f.s.EndpointAliasPromote(ctx, &structs.EndpointAliasPromoteArgs{Alias: "llm.primary", Endpoint: "llm-opp"}); !errors.Is(err, structs.ErrInvalid) ||
		!strings.Contains(err.Error(), `node "laptop"`) || !strings.Contains(err.Error(), "opportunistic") {
		t.Fatalf("opportunistic refusal = %v", err)
	}

	before := time.Now().UnixNano()
	a, index, err := f.s.EndpointAliasPromote(ctx, &structs.EndpointAliasPromoteArgs{Alias: "llm.primary", Endpoint: "llm-a", PromotedBy: "acc-1 (ops)"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Endpoint != "llm-a" || a.JobID != "llm-a-job" || a.PromotedBy != "acc-1 (ops)" || a.PromotedAt < before || a.ModifyIndex != index || a.Namespace != "default" {
		t.Fatalf("alias = %+v (index %d)", a, index)
	}
	v, _, err := f.s.EndpointGet(ctx, "default", "llm.primary", nil)
	if err != nil || v.Name != "llm-a" || len(v.Aliases) != 1 || v.Aliases[0] != "llm.primary" {
		t.Fatalf("llm.primary resolves to %+v, %v", v, err)
	}
	if _, _, err := f.s.EndpointGet(ctx, "prod", "llm.primary", nil); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("alias in another namespace: %v", err)
	}
	anon, _, err := f.s.EndpointAliasPromote(ctx, &structs.EndpointAliasPromoteArgs{Alias: "llm.canary", Endpoint: "llm-b"})
	if err != nil || anon.PromotedBy != "anonymous" {
		t.Fatalf("canary = %+v, %v", anon, err)
	}

	if _, err := f.s.EndpointAliasDemote(ctx, "default", "llm.primary"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.s.EndpointGet(ctx, "default", "llm.primary", nil); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("demoted alias still resolves: %v", err)
	}
	if _, err := f.s.EndpointAliasDemote(ctx, "default", "llm.primary"); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("second demote: %v", err)
	}

	stopped := f.jobs["llm-b"].Copy()
	stopped.Stop = true
	f.apply(t, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: stopped})
	if v, _, err := f.s.EndpointGet(ctx, "default", "llm-b", nil); err != nil || v.Status != structs.EndpointStatusStopped {
		t.Fatalf("stopped job's endpoint = %+v, %v", v, err)
	}
	if _, _, err := f.s.EndpointAliasPromote(ctx, &structs.EndpointAliasPromoteArgs{Alias: "llm.primary", Endpoint: "llm-b"}); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("promotion onto a stopped job's endpoint: %v", err)
	}

	// llm.canary still names llm-b once its job is purged: the read says
	// the alias exists and what to do, not that no such name exists.
	f.apply(t, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{JobID: stopped.ID, Purge: true})
	_, _, err = f.s.EndpointGet(ctx, "default", "llm.canary", nil)
	if !errors.Is(err, structs.ErrNotFound) || !strings.Contains(err.Error(), `alias "llm.canary"`) ||
		!strings.Contains(err.Error(), `endpoint "llm-b", which no job declares`) || !strings.Contains(err.Error(), "demote") {
		t.Fatalf("alias of a purged job's endpoint: %v", err)
	}
}

// TestEndpointAliasMoveNeverTwoOrNone (issue 14, Must show 4): an alias
// moved between two endpoints two hundred times while readers hammer the
// fleet view and the alias list: every read finds it on exactly one
// endpoint, never on both and never on none; a blocking reader wakes on
// each move.
func TestEndpointAliasMoveNeverTwoOrNone(t *testing.T) {
	f := newEndpointFleet(t)
	ctx := endpointCtx(t)
	if _, _, err := f.s.EndpointAliasPromote(ctx, &structs.EndpointAliasPromoteArgs{Alias: "llm.primary", Endpoint: "llm-a"}); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var reads, blockingWakes atomic.Int64
	var wg sync.WaitGroup
	check := func(list []*structs.EndpointView) error {
		holders := 0
		for _, v := range list {
			for _, a := range v.Aliases {
				if a == "llm.primary" {
					holders++
				}
			}
		}
		if holders != 1 {
			return fmt.Errorf("llm.primary listed on %d endpoints", holders)
		}
		return nil
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				list, _, err := f.s.EndpointList(ctx, "default", nil)
				if err == nil {
					err = check(list)
				}
				if err == nil {
					var as []*structs.EndpointAlias
					as, _, err = f.s.EndpointAliasList(ctx, "default", nil)
					if err == nil && (len(as) != 1 || (as[0].Endpoint != "llm-a" && as[0].Endpoint != "llm-b")) {
						err = fmt.Errorf("alias list = %v", as)
					}
				}
				if err == nil {
					var v *structs.EndpointView
					v, _, err = f.s.EndpointGet(ctx, "default", "llm.primary", nil)
					if err == nil && v.Name != "llm-a" && v.Name != "llm-b" {
						err = fmt.Errorf("llm.primary resolves to %q", v.Name)
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	// A blocking reader follows the moves by index.
	wg.Add(1)
	go func() {
		defer wg.Done()
		var index uint64
		for !stop.Load() {
			list, meta, err := f.s.EndpointList(ctx, "default", &structs.QueryOptions{MinQueryIndex: index, MaxQueryTime: 200 * time.Millisecond})
			if err == nil {
				err = check(list)
			}
			if err != nil {
				t.Error(err)
				return
			}
			if meta.Index > index && index > 0 {
				blockingWakes.Add(1)
			}
			index = meta.Index
		}
	}()
	const moves = 200
	for i := range moves {
		ep := []string{"llm-b", "llm-a"}[i%2]
		if _, _, err := f.s.EndpointAliasPromote(ctx, &structs.EndpointAliasPromoteArgs{Alias: "llm.primary", Endpoint: ep}); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if reads.Load() == 0 || blockingWakes.Load() == 0 {
		t.Fatalf("reads %d, blocking wakes %d", reads.Load(), blockingWakes.Load())
	}
	t.Logf("%d moves, %d checked reads, %d blocking wakes", moves, reads.Load(), blockingWakes.Load())
	v, _, err := f.s.EndpointGet(ctx, "default", "llm.primary", nil)
	if err != nil || v.Name != "llm-a" {
		t.Fatalf("after %d moves llm.primary resolves to %+v, %v", moves, v, err)
	}
}
