package state_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// aliasFixture is a store with two endpoint jobs ("llm-a", "llm-b") placed
// on a continuous node, an unplaced one ("llm-idle") and one placed on an
// opportunistic node ("llm-opp").
type aliasFixture struct {
	s          *state.StateStore
	jobs       map[string]*structs.Job
	index      uint64
	node, oppN *structs.Node
}

func newAliasFixture(t *testing.T) *aliasFixture {
	t.Helper()
	s, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	f := &aliasFixture{s: s, jobs: map[string]*structs.Job{}, node: statetest.Node(0), oppN: statetest.Node(0)}
	f.oppN.Availability = structs.AvailabilityOpportunistic
	f.write(t, s.UpsertNode(f.next(), f.node))
	f.write(t, s.UpsertNode(f.next(), f.oppN))
	var placed []*structs.Allocation
	for _, name := range []string{"llm-a", "llm-b", "llm-idle", "llm-opp"} {
		job := statetest.Job()
		tg := job.TaskGroups[0]
		tg.Count = 2
		tg.Endpoint = &structs.Endpoint{Name: name, Port: 9000, Model: "m"}
		if name == "llm-opp" {
			tg.Availability = structs.AvailabilityOpportunistic
		}
		f.write(t, s.UpsertJob(f.next(), job))
		f.jobs[name] = job
		switch name {
		case "llm-a", "llm-b":
			placed = append(placed, statetest.Alloc(job, f.node))
		case "llm-opp":
			placed = append(placed, statetest.Alloc(job, f.oppN))
		}
	}
	f.write(t, s.UpsertPlanResults(f.next(), &structs.ApplyPlanResultsRequest{AllocsPlaced: placed, UpdatedAt: 1}))
	return f
}

func (f *aliasFixture) next() uint64 { f.index++; return f.index }

func (f *aliasFixture) write(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *aliasFixture) alias(name, endpoint string) *structs.EndpointAlias {
	return &structs.EndpointAlias{Namespace: "default", Name: name, Endpoint: endpoint, JobID: f.jobs[endpoint].ID,
		PromotedBy: "accessor-1 (ops)", PromotedAt: 1_700_000_000_000_000_000}
}

// resolvesTo lists, from one snapshot, the endpoints whose alias index
// holds alias name.
func resolvesTo(t *testing.T, s *state.StateStore, name string) []string {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ep := range []string{"llm-a", "llm-b", "llm-idle", "llm-opp"} {
		as, err := snap.EndpointAliasesByEndpoint(nil, "default", ep)
		if err != nil {
			t.Error(err)
			return nil
		}
		for _, a := range as {
			if a.Name == name {
				out = append(out, ep)
			}
		}
	}
	return out
}

// TestPromoteEndpointAliasMovesAtomically moves an alias between two
// endpoints a thousand times while readers check, each in one snapshot,
// that it resolves to exactly one endpoint; a blocking query on the table
// wakes at each move.
func TestPromoteEndpointAliasMovesAtomically(t *testing.T) {
	f := newAliasFixture(t)
	f.write(t, f.s.PromoteEndpointAlias(f.next(), f.alias("llm.primary", "llm-a")))

	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if got := resolvesTo(t, f.s, "llm.primary"); len(got) != 1 {
					t.Errorf("alias resolves to %v, want exactly one endpoint", got)
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := range 1000 {
		ep := []string{"llm-b", "llm-a"}[i%2]
		f.write(t, f.s.PromoteEndpointAlias(f.next(), f.alias("llm.primary", ep)))
	}
	stop.Store(true)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("the readers read nothing")
	}
	if got := resolvesTo(t, f.s, "llm.primary"); len(got) != 1 || got[0] != "llm-a" {
		t.Fatalf("final alias resolves to %v", got)
	}

	// A blocking query on the alias wakes when it moves.
	start := f.index
	done := make(chan uint64, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, idx, err := f.s.BlockingQuery(ctx, start, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
			a, err := st.EndpointAlias(ws, "default", "llm.primary")
			if err != nil {
				return nil, 0, err
			}
			ix, err := st.Index(state.TableEndpointAliases)
			return a, ix, err
		})
		if err != nil {
			t.Error(err)
		}
		done <- idx
	}()
	f.write(t, f.s.PromoteEndpointAlias(f.next(), f.alias("llm.primary", "llm-b")))
	select {
	case idx := <-done:
		if idx != f.index {
			t.Fatalf("blocking query woke at %d, want %d", idx, f.index)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("blocking query did not wake on the move")
	}
}

// TestPromoteEndpointAliasRefusals checks each refusal and that it writes
// nothing, then demotion.
func TestPromoteEndpointAliasRefusals(t *testing.T) {
	f := newAliasFixture(t)
	stopped := f.jobs["llm-b"].Copy()
	stopped.Stop = true
	f.write(t, f.s.UpsertJob(f.next(), stopped))
	otherNS := f.alias("llm.primary", "llm-a")
	otherNS.Namespace = "prod"
	noWho := f.alias("llm.primary", "llm-a")
	noWho.PromotedBy = ""
	cases := []struct {
		name  string
		alias *structs.EndpointAlias
		want  error
	}{
		{"opportunistic node", f.alias("llm.primary", "llm-opp"), structs.ErrEndpointOpportunistic},
		{"no placed member", f.alias("llm.primary", "llm-idle"), structs.ErrEndpointNotPlaced},
		{"stopped job", f.alias("llm.primary", "llm-b"), structs.ErrNotFound},
		{"job of another namespace", otherNS, structs.ErrNotFound},
		{"without who", noWho, structs.ErrInvalid},
		{"bad name", f.alias("-llm", "llm-a"), structs.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, _ := f.s.Hash()
			err := f.s.PromoteEndpointAlias(f.next(), c.alias)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if after, _ := f.s.Hash(); after != before {
				t.Fatal("a refused promotion changed the state")
			}
		})
	}
	if errors.Is(structs.ErrEndpointOpportunistic, structs.ErrInvalid) != true {
		t.Fatal("ErrEndpointOpportunistic does not match ErrInvalid")
	}
	f.write(t, f.s.PromoteEndpointAlias(f.next(), f.alias("llm.primary", "llm-a")))
	f.write(t, f.s.PromoteEndpointAlias(f.next(), f.alias("llm.canary", "llm-a")))
	as, _ := f.s.EndpointAliasesByEndpoint(nil, "default", "llm-a")
	if len(as) != 2 || as[0].Name != "llm.canary" || as[1].Name != "llm.primary" {
		t.Fatalf("aliases of llm-a = %v", as)
	}
	f.write(t, f.s.DeleteEndpointAlias(f.next(), "default", "llm.primary"))
	if a, _ := f.s.EndpointAlias(nil, "default", "llm.primary"); a != nil {
		t.Fatalf("demoted alias still stored: %+v", a)
	}
	if err := f.s.DeleteEndpointAlias(f.next(), "default", "llm.primary"); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("second demote err = %v", err)
	}
	// The namespace listing is exact: "default" does not list "default2".
	if as, _ := f.s.EndpointAliasesByNamespace(nil, "default"); len(as) != 1 || as[0].Name != "llm.canary" {
		t.Fatalf("aliases of default = %v", as)
	}
	if as, _ := f.s.EndpointAliasesByNamespace(nil, "def"); len(as) != 0 {
		t.Fatalf("aliases of namespace def = %v", as)
	}
}

// TestEndpointAliasRestoreRoundTrip: aliases and their table index read
// from one store and restored into a new one are found through both
// indexes, unchanged; a malformed record is refused.
func TestEndpointAliasRestoreRoundTrip(t *testing.T) {
	f := newAliasFixture(t)
	f.write(t, f.s.PromoteEndpointAlias(f.next(), f.alias("llm.primary", "llm-a")))
	f.write(t, f.s.PromoteEndpointAlias(f.next(), f.alias("llm.canary", "llm-b")))
	aliases, err := f.s.EndpointAliases(nil)
	if err != nil || len(aliases) != 2 {
		t.Fatalf("aliases %v, %v", aliases, err)
	}
	idx, _ := f.s.Index(state.TableEndpointAliases)

	dst, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	r, err := dst.Restore()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range aliases {
		f.write(t, r.EndpointAliasRestore(a))
	}
	f.write(t, r.IndexRestore(state.TableEndpointAliases, idx))
	if err := r.EndpointAliasRestore(&structs.EndpointAlias{Name: "x"}); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("restore without namespace: %v", err)
	}
	f.write(t, r.Commit())
	if got, _ := dst.Index(state.TableEndpointAliases); got != idx {
		t.Fatalf("restored index %d, want %d", got, idx)
	}
	for _, a := range aliases {
		got, _ := dst.EndpointAlias(nil, a.Namespace, a.Name)
		by, _ := dst.EndpointAliasesByEndpoint(nil, a.Namespace, a.Endpoint)
		if got == nil || *got != *a || len(by) != 1 || by[0].Name != a.Name {
			t.Fatalf("restored %q = %+v (by endpoint %v), want %+v", a.Name, got, by, a)
		}
	}
}

// TestEndpointAliasEvents: a promotion, a move and a demotion each publish
// one EndpointAlias event at their Raft index, keyed by alias and
// filterable by endpoint; a refused promotion publishes nothing.
func TestEndpointAliasEvents(t *testing.T) {
	f := newAliasFixture(t)
	sub := f.s.Events().Subscribe(f.index, structs.EventTopics{structs.TopicEndpointAlias: {"*"}})
	next := func() *structs.Event {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("next event after %d: %v", sub.Index(), err)
		}
		if len(b.Events) != 1 {
			t.Fatalf("batch at %d holds %d events, want 1: %+v", b.Index, len(b.Events), b.Events)
		}
		return b.Events[0]
	}
	check := func(e *structs.Event, typ, endpoint string, index uint64) {
		t.Helper()
		if e.Topic != structs.TopicEndpointAlias || e.Type != typ || e.Key != "llm.primary" || e.Index != index ||
			e.Payload.EndpointAlias == nil || e.Payload.EndpointAlias.Endpoint != endpoint ||
			len(e.FilterKeys) != 2 || e.FilterKeys[0] != endpoint || e.FilterKeys[1] != f.jobs[endpoint].ID {
			t.Fatalf("event = %+v (alias %+v), want %s of llm.primary -> %s at %d", e, e.Payload.EndpointAlias, typ, endpoint, index)
		}
	}
	f.write(t, f.s.PromoteEndpointAlias(f.next(), f.alias("llm.primary", "llm-a")))
	check(next(), structs.EventEndpointAliasPromoted, "llm-a", f.index)
	// Refused (opportunistic node): no event; the next one is the move.
	if err := f.s.PromoteEndpointAlias(f.next(), f.alias("llm.primary", "llm-opp")); err == nil {
		t.Fatal("promotion onto an opportunistic node was accepted")
	}
	f.write(t, f.s.PromoteEndpointAlias(f.next(), f.alias("llm.primary", "llm-b")))
	check(next(), structs.EventEndpointAliasPromoted, "llm-b", f.index)
	f.write(t, f.s.DeleteEndpointAlias(f.next(), "default", "llm.primary"))
	check(next(), structs.EventEndpointAliasDemoted, "llm-b", f.index)
	if !(structs.EventTopics{structs.TopicEndpointAlias: {"llm-b"}}).Matches(&structs.Event{Topic: structs.TopicEndpointAlias, Key: "llm.primary", FilterKeys: []string{"llm-b", "j"}}) {
		t.Fatal("EndpointAlias:llm-b does not match an event of an alias on llm-b")
	}
}
