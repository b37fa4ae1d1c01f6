package api

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Operator is the client for the /v1/operator routes of an HA cluster.
type Operator struct{ c *Client }

// Operator returns the operator endpoints.
func (c *Client) Operator() *Operator { return &Operator{c: c} }

// RaftServer is one server of the Raft configuration.
type RaftServer struct {
	// ID is the server's Raft ID (its name).
	ID string
	// Node is the server's name.
	Node string
	// Address is its Raft address, "host:port".
	Address string
	// Leader reports whether it is the current leader.
	Leader bool
	// Voter reports whether it votes.
	Voter bool
}

// RaftConfiguration is the body of GET /v1/operator/raft/configuration.
type RaftConfiguration struct {
	Servers []*RaftServer
}

// RaftGetConfiguration returns the servers of the Raft configuration.
func (o *Operator) RaftGetConfiguration(q *QueryOptions) (*RaftConfiguration, error) {
	var out RaftConfiguration
	if _, err := o.c.query("/v1/operator/raft/configuration", &out, q); err != nil {
		return nil, err
	}
	return &out, nil
}

// RaftRemovePeerByID removes the server with Raft ID id from the Raft
// configuration (the request is forwarded to the leader).
func (o *Operator) RaftRemovePeerByID(id string, w *WriteOptions) error {
	return o.removePeer("id", id, w)
}

// RaftRemovePeerByAddress removes the server with Raft address addr
// ("host:port") from the Raft configuration.
func (o *Operator) RaftRemovePeerByAddress(addr string, w *WriteOptions) error {
	return o.removePeer("address", addr, w)
}

func (o *Operator) removePeer(param, v string, w *WriteOptions) error {
	params := url.Values{}
	params.Set(param, v)
	_, err := o.c.write(http.MethodDelete, "/v1/operator/raft/peer", params, nil, nil, w)
	return err
}

// SnapshotSave streams a checksummed snapshot archive of the cluster's
// state from the leader; the caller closes it. With q.AllowStale the
// answering server archives its own state.
func (o *Operator) SnapshotSave(q *QueryOptions) (io.ReadCloser, error) {
	var ctx context.Context
	if q != nil {
		ctx = q.Context
	}
	req, err := o.c.newRequest(ctx, http.MethodGet, "/v1/operator/snapshot", queryParams(q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := o.c.do(req)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// SnapshotRestore replaces the cluster's state with the archive read from
// r (as SnapshotSave wrote it). The servers refuse a corrupted archive and
// then change nothing.
func (o *Operator) SnapshotRestore(r io.Reader, w *WriteOptions) error {
	var ctx context.Context
	if w != nil {
		ctx = w.Context
	}
	req, err := o.c.newRequest(ctx, http.MethodPut, "/v1/operator/snapshot", nil, nil)
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(r)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := o.c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// StateHash is the body of GET /v1/operator/state-hash: a digest of the
// answering server's state store.
type StateHash struct {
	// Hash is the hex SHA-256 of the state store's content.
	Hash string
	// Index is the highest Raft index the server has applied.
	Index uint64
}

// StateHash returns the answering server's state hash; servers that
// applied the same log report the same one.
func (o *Operator) StateHash() (*StateHash, error) {
	var out StateHash
	if _, err := o.c.query("/v1/operator/state-hash", &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentMember is one server known through gossip.
type AgentMember struct {
	// Name is the server's name.
	Name string
	// Addr is the host of its gossip address and Port the port (Nomad's
	// shape); GossipAddr joins them.
	Addr string
	Port uint16
	// Tags holds "region", "dc" and "role", as Nomad's members do.
	Tags map[string]string `json:",omitempty"`
	// Status is "alive", "failed" or "left".
	Status          string
	Datacenter      string
	RaftAddr        string
	HTTPAddr        string
	BootstrapExpect int
	// Leader reports whether it is the Raft leader.
	Leader bool
	// StatusSince is when Status last changed, as the answering server saw.
	StatusSince time.Time
}

// GossipAddr returns the member's gossip address, "host:port" (Addr
// alone when Port is 0, as from older agents whose Addr had both).
func (m *AgentMember) GossipAddr() string {
	if m.Port == 0 {
		return m.Addr
	}
	return net.JoinHostPort(m.Addr, strconv.Itoa(int(m.Port)))
}

// AgentMembers is the body of GET /v1/agent/members: the answering
// server's name, region and datacenter, and the members.
type AgentMembers struct {
	ServerName   string
	ServerRegion string
	ServerDC     string
	Members      []*AgentMember
}

// Members returns the servers the agent's server knows through gossip.
func (a *Agent) Members() (*AgentMembers, error) {
	var out AgentMembers
	if _, err := a.c.query("/v1/agent/members", &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// agentJoinResponse is the body of PUT /v1/agent/join.
type agentJoinResponse struct {
	NumJoined int    `json:"num_joined"`
	Error     string `json:"error"`
}

// Join asks the agent's server to join the servers at addrs (gossip
// addresses, "host" or "host:port") and returns how many it reached.
func (a *Agent) Join(addrs ...string) (int, error) {
	if len(addrs) == 0 {
		return 0, fmt.Errorf("join: no address given")
	}
	params := url.Values{}
	for _, ad := range addrs {
		params.Add("address", ad)
	}
	var out agentJoinResponse
	if _, err := a.c.write(http.MethodPut, "/v1/agent/join", params, nil, &out, nil); err != nil {
		return 0, err
	}
	if out.Error != "" {
		return out.NumJoined, fmt.Errorf("join: %s", out.Error)
	}
	return out.NumJoined, nil
}
