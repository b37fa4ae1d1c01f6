package api

// Agent is the client for the /v1/agent routes.
type Agent struct{ c *Client }

// Agent returns the agent endpoints.
func (c *Client) Agent() *Agent { return &Agent{c: c} }

// HealthResponse is the body of GET /v1/status/health.
type HealthResponse struct {
	OK bool `json:"ok"`
}

// Self returns the agent's description of itself (configuration, version,
// Raft stats), as free-form JSON.
func (a *Agent) Self() (map[string]interface{}, error) {
	var out map[string]interface{}
	if _, err := a.c.query("/v1/agent/self", &out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// Health reports whether the agent's cluster has a leader. An unhealthy
// agent answers 503, which Health returns as a *StatusError.
func (a *Agent) Health() (*HealthResponse, error) {
	var out HealthResponse
	if _, err := a.c.query("/v1/status/health", &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}
