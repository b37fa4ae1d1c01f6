package state

import (
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

func testStore(t *testing.T) *StateStore {
	t.Helper()
	s, err := NewStateStore()
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	return s
}

func mustIndex(t *testing.T, s *StateStore, table string) uint64 {
	t.Helper()
	idx, err := s.Index(table)
	if err != nil {
		t.Fatalf("index %s: %v", table, err)
	}
	return idx
}

func mustJob(t *testing.T, s *StateStore, id string) *structs.Job {
	t.Helper()
	j, err := s.JobByID(nil, id)
	if err != nil || j == nil {
		t.Fatalf("job %s: %v, %v", id, j, err)
	}
	return j
}

func mustAlloc(t *testing.T, s *StateStore, id string) *structs.Allocation {
	t.Helper()
	a, err := s.AllocByID(nil, id)
	if err != nil || a == nil {
		t.Fatalf("alloc %s: %v, %v", id, a, err)
	}
	return a
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
