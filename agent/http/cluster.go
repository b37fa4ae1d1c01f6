package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gpulayer/gpulayer/server"
)

// MaxSnapshotBytes is the default cap on the body of PUT
// /v1/operator/snapshot when Config.MaxSnapshotBytes is zero: 1 GiB. The
// archive is spooled to the data dir and decoded into a scratch state in
// memory before Raft sees it, so the cap bounds both disk and memory; a
// cluster of 10000 nodes and 100000 allocations snapshots to well under
// 1 GiB. The archive is not compressed, so no expansion can pass the cap.
const MaxSnapshotBytes = 1 << 30

// ClusterServer is what the HA routes and write forwarding need from a
// server; *server.Server implements it. When Config.Server implements
// ClusterServer too, the handler serves
//
//	GET    /v1/operator/raft/configuration   Raft peers (OperatorRaftConfiguration)
//	DELETE /v1/operator/raft/peer?id=ID      remove a peer (or ?address=HOST:PORT); leader
//	GET    /v1/operator/snapshot             stream a checksummed snapshot archive; leader unless ?stale
//	PUT    /v1/operator/snapshot             restore an archive (the request body); leader
//	GET    /v1/agent/members                 gossip members (AgentMembersResponse)
//	PUT    /v1/agent/join?address=A[&address=B]  join servers over gossip (AgentJoinResponse); local
//
// and forwards writes that reach a follower to the leader (forward.go).
type ClusterServer interface {
	// IsLeader reports whether this server is the Raft leader.
	IsLeader() bool
	// LeaderHTTPAddr is the leader's HTTP address, "" when unknown.
	LeaderHTTPAddr() string
	// VerifyLeader confirms leadership with a quorum, for consistent reads.
	VerifyLeader(ctx context.Context) error
	RaftPeers() ([]server.RaftPeer, error)
	RemoveRaftPeer(ctx context.Context, idOrAddr string) error
	SnapshotSave(ctx context.Context, w io.Writer) error
	SnapshotRestore(ctx context.Context, r io.Reader) error
	Members() []server.Member
	Join(addrs []string) (int, error)
}

// OperatorRaftConfiguration is the body of GET
// /v1/operator/raft/configuration (Nomad's RaftConfigurationResponse
// shape).
type OperatorRaftConfiguration struct {
	Servers []OperatorRaftServer
}

// OperatorRaftServer is one Raft peer.
type OperatorRaftServer struct {
	ID      string
	Node    string
	Address string
	Leader  bool
	Voter   bool
}

// AgentMembersResponse is the body of GET /v1/agent/members.
type AgentMembersResponse struct {
	// ServerName, ServerRegion and ServerDC describe the answering
	// server, as in Nomad's ServerMembers.
	ServerName   string
	ServerRegion string
	ServerDC     string
	Members      []AgentMember
}

// AgentMember is one server known through gossip.
type AgentMember struct {
	Name            string
	Addr            string
	Status          string
	Datacenter      string
	RaftAddr        string
	HTTPAddr        string
	BootstrapExpect int
	Leader          bool
	// StatusSince is when the status last changed, RFC 3339.
	StatusSince time.Time
	// Port is the gossip port of Addr; Tags holds "region", "dc" and
	// "role", as Nomad's members do.
	Port uint16
	Tags map[string]string
}

// AgentJoinResponse is the body of PUT /v1/agent/join (Nomad's shape).
type AgentJoinResponse struct {
	NumJoined int    `json:"num_joined"`
	Error     string `json:"error"`
}

// clusterRoutes registers the HA routes and sets up forwarding when the
// server implements ClusterServer.
func (h *handler) clusterRoutes() {
	cs, ok := h.srv.(ClusterServer)
	if !ok {
		return
	}
	h.cluster = cs
	h.fwd = newForwarder(h)
	h.handle("GET /v1/operator/raft/configuration", h.operatorRaftConfiguration)
	h.handle("DELETE /v1/operator/raft/peer", h.operatorRaftRemovePeer)
	h.mux.HandleFunc("GET /v1/operator/snapshot", h.operatorSnapshotSave)
	h.handle("PUT /v1/operator/snapshot", h.operatorSnapshotRestore)
	h.handle("GET /v1/agent/members", h.agentMembers)
	h.handle("PUT /v1/agent/join", h.agentJoin)
}

func (h *handler) operatorRaftConfiguration(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	peers, err := h.cluster.RaftPeers()
	if err != nil {
		return nil, err
	}
	out := OperatorRaftConfiguration{Servers: []OperatorRaftServer{}}
	for _, p := range peers {
		out.Servers = append(out.Servers, OperatorRaftServer{ID: p.ID, Node: p.ID, Address: p.Address, Leader: p.Leader, Voter: p.Voter})
	}
	return out, nil
}

// operatorRaftRemovePeer handles DELETE /v1/operator/raft/peer with
// exactly one of ?id= or ?address=.
func (h *handler) operatorRaftRemovePeer(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q := r.URL.Query()
	id, addr := q.Get("id"), q.Get("address")
	switch {
	case id == "" && addr == "":
		return nil, badRequest("remove peer: give an id or address parameter")
	case id != "" && addr != "":
		return nil, badRequest("remove peer: give either the id or the address parameter, not both")
	}
	target := id
	if target == "" {
		target = addr
	}
	if err := h.cluster.RemoveRaftPeer(r.Context(), target); err != nil {
		return nil, err
	}
	return map[string]string{"removed": target}, nil
}

// operatorSnapshotSave handles GET /v1/operator/snapshot: the archive as
// application/octet-stream. An error before the first byte is a JSON
// error; one mid-stream cuts the response short (the archive's checksum
// makes a cut-short file fail to restore).
func (h *handler) operatorSnapshotSave(w http.ResponseWriter, r *http.Request) {
	lw := &lazyHeaderWriter{w: w}
	if err := h.cluster.SnapshotSave(r.Context(), lw); err != nil {
		if !lw.started {
			h.writeError(w, r, err)
			return
		}
		h.logger.Warn("snapshot stream cut short", "error", err)
		return
	}
	if !lw.started {
		lw.start()
	}
}

// lazyHeaderWriter sends the 200 and content type on the first write, so
// an error before any byte can still be answered as JSON.
type lazyHeaderWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyHeaderWriter) start() {
	l.started = true
	l.w.Header().Set("Content-Type", "application/octet-stream")
	l.w.WriteHeader(http.StatusOK)
}

func (l *lazyHeaderWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.start()
	}
	return l.w.Write(p)
}

// operatorSnapshotRestore handles PUT /v1/operator/snapshot: the body is
// an archive from GET /v1/operator/snapshot, at most Config.MaxSnapshotBytes
// (413 past it, refused before anything is restored).
func (h *handler) operatorSnapshotRestore(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	limit := h.maxSnapshot
	if limit <= 0 {
		limit = MaxSnapshotBytes
	}
	if r.ContentLength > limit {
		return nil, &codedError{code: http.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("snapshot of %d bytes is larger than the limit of %d bytes (limits { snapshot_restore_max_bytes })", r.ContentLength, limit)}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	if err := h.cluster.SnapshotRestore(r.Context(), body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("snapshot larger than %d bytes: %w", mbe.Limit, err)
		}
		return nil, err
	}
	return map[string]bool{"restored": true}, nil
}

func (h *handler) agentMembers(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	out := AgentMembersResponse{Members: []AgentMember{}, ServerRegion: h.region}
	stats := h.srv.Stats()
	out.ServerName = stats["server.name"]
	for _, m := range h.cluster.Members() {
		host, port := m.Addr, uint64(0)
		if hh, p, err := net.SplitHostPort(m.Addr); err == nil {
			host = hh
			port, _ = strconv.ParseUint(p, 10, 16)
		}
		if m.Name == out.ServerName {
			out.ServerDC = m.Datacenter
		}
		out.Members = append(out.Members, AgentMember{
			Name: m.Name, Addr: host, Port: uint16(port), Status: m.Status, Datacenter: m.Datacenter,
			RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr, BootstrapExpect: m.BootstrapExpect,
			Leader: m.Leader, StatusSince: m.StatusSince,
			Tags: map[string]string{"region": h.region, "dc": m.Datacenter, "role": "nomad"},
		})
	}
	return out, nil
}

// agentJoin handles PUT /v1/agent/join?address=A&address=B: this server
// contacts the given gossip addresses. A join that reaches none answers
// 500 with the error in the body's error field too.
func (h *handler) agentJoin(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	addrs := r.URL.Query()["address"]
	var nonEmpty []string
	for _, a := range addrs {
		if a != "" {
			nonEmpty = append(nonEmpty, a)
		}
	}
	if len(nonEmpty) == 0 {
		return nil, badRequest("join: give at least one address parameter (host or host:port of a server's gossip)")
	}
	n, err := h.cluster.Join(nonEmpty)
	if err != nil {
		return nil, err
	}
	return AgentJoinResponse{NumJoined: n}, nil
}
