package api

import "net/url"

// Nodes is the client for the /v1/nodes routes.
type Nodes struct{ c *Client }

// Nodes returns the nodes endpoints.
func (c *Client) Nodes() *Nodes { return &Nodes{c: c} }

// List returns the nodes, filtered by q.Prefix.
func (n *Nodes) List(q *QueryOptions) ([]*Node, *QueryMeta, error) {
	var out []*Node
	qm, err := n.c.query("/v1/nodes", &out, q)
	if err != nil {
		return nil, nil, err
	}
	return out, qm, nil
}

// Info returns the node with the given full ID.
func (n *Nodes) Info(id string, q *QueryOptions) (*Node, *QueryMeta, error) {
	var out Node
	qm, err := n.c.query("/v1/node/"+url.PathEscape(id), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}
