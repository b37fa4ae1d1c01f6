package api

import "net/http"

// System is the client for the /v1/system routes.
type System struct{ c *Client }

// System returns the system endpoints.
func (c *Client) System() *System { return &System{c: c} }

// GCResult is the body of PUT /v1/system/gc: how many evaluations,
// allocations, jobs and nodes the collection chose to remove.
type GCResult struct {
	Evals  int
	Allocs int
	Jobs   int
	Nodes  int
	// Artifacts counts the unreferenced artifacts removed.
	Artifacts int
}

// GarbageCollect asks the leader to collect garbage now, every threshold
// at zero, as Nomad's System.GarbageCollect. Errors from the agent are
// *StatusError values.
func (s *System) GarbageCollect() error {
	_, err := s.GarbageCollectCounts(nil)
	return err
}

// GarbageCollectCounts is GarbageCollect that also returns what the
// collection chose to remove.
func (s *System) GarbageCollectCounts(w *WriteOptions) (*GCResult, error) {
	var out GCResult
	if _, err := s.c.write(http.MethodPut, "/v1/system/gc", nil, nil, &out, w); err != nil {
		return nil, err
	}
	return &out, nil
}
