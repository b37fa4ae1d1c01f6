package api

import "net/url"

// Allocations is the client for the /v1/allocations routes.
type Allocations struct{ c *Client }

// Allocations returns the allocations endpoints.
func (c *Client) Allocations() *Allocations { return &Allocations{c: c} }

// List returns the allocations, filtered by q.Prefix.
func (a *Allocations) List(q *QueryOptions) ([]*Allocation, *QueryMeta, error) {
	var out []*Allocation
	qm, err := a.c.query("/v1/allocations", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Info returns the allocation with the given full ID.
func (a *Allocations) Info(id string, q *QueryOptions) (*Allocation, *QueryMeta, error) {
	var out Allocation
	qm, err := a.c.query("/v1/allocation/"+url.PathEscape(id), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}
