package api

// Status is the client for the /v1/status routes.
type Status struct{ c *Client }

// Status returns the status endpoints.
func (c *Client) Status() *Status { return &Status{c: c} }

// Leader returns the leader's Raft address, or "" when there is none.
func (s *Status) Leader() (string, error) {
	var out string
	if _, err := s.c.query("/v1/status/leader", &out, nil); err != nil {
		return "", err
	}
	return out, nil
}

// Peers returns the Raft addresses of the servers.
func (s *Status) Peers() ([]string, error) {
	var out []string
	if _, err := s.c.query("/v1/status/peers", &out, nil); err != nil {
		return nil, err
	}
	return out, nil
}
