package server

import "github.com/gpulayer/gpulayer/structs"

// nodeAllocsWatch computes the index of one NodeAllocations blocking query
// across its reads, so that a client's watch wakes when garbage collection
// removes one of its node's allocations: a removal changes no remaining
// allocation's ModifyIndex, so an index built from those alone would not
// move.
type nodeAllocsWatch struct {
	// minIndex is the query's MinQueryIndex.
	minIndex uint64
	// first holds the allocation IDs of the query's first read; nil before
	// it.
	first map[string]bool
	// byAllocModify builds the index from AllocModifyIndex (server-side
	// changes only) instead of ModifyIndex (NodeClientAllocs).
	byAllocModify bool
}

// index returns the index of a read that found allocs while the allocs
// table's index was table: the highest ModifyIndex of allocs (at least 1),
// not below minIndex unless table is (a restored, older state, which the
// client must see as the index going back), and at least table once an
// allocation of the first read is missing. A removal between two queries
// (before the first read) shows at the next change or at the wait's end.
func (w *nodeAllocsWatch) index(allocs []*structs.Allocation, table uint64) uint64 {
	highest := maxAllocModifyIndex(allocs)
	if w.byAllocModify {
		highest = 1
		for _, a := range allocs {
			highest = max(highest, a.AllocModifyIndex)
		}
	}
	idx := max(highest, min(w.minIndex, table))
	if w.first == nil {
		w.first = make(map[string]bool, len(allocs))
		for _, a := range allocs {
			w.first[a.ID] = true
		}
		return idx
	}
	kept := 0
	for _, a := range allocs {
		if w.first[a.ID] {
			kept++
		}
	}
	if kept < len(w.first) {
		idx = max(idx, table)
	}
	return idx
}
