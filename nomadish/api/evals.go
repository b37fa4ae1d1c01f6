package api

import "net/url"

// Evaluations is the client for the /v1/evaluation routes.
type Evaluations struct{ c *Client }

// Evaluations returns the evaluations endpoints.
func (c *Client) Evaluations() *Evaluations { return &Evaluations{c: c} }

// Info returns the evaluation with the given full ID.
func (e *Evaluations) Info(id string, q *QueryOptions) (*Evaluation, *QueryMeta, error) {
	var out Evaluation
	qm, err := e.c.query("/v1/evaluation/"+url.PathEscape(id), &out, q)
	if err != nil {
		return nil, nil, err
	}
	return &out, qm, nil
}
