package structs

import "time"

// HeaderNodeSecret carries a client node's SecretID on the node routes of
// the HTTP API (register, heartbeat, allocation watch and updates). The
// server compares it with the SecretID stored for the node.
const HeaderNodeSecret = "X-Gpulayer-Node-Secret"

// NodeRegisterHTTPRequest is the body of PUT /v1/node/register. Node's
// SecretID is not part of Node's JSON encoding, so the secret travels
// explicitly in SecretID.
type NodeRegisterHTTPRequest struct {
	Node     *Node
	SecretID string
}

// NodeHeartbeatHTTPRequest is the body of PUT /v1/node/{id}/heartbeat: the
// status the node reports (NodeStatusReady normally).
type NodeHeartbeatHTTPRequest struct {
	Status string
}

// NodeHeartbeatHTTPResponse answers a node registration or heartbeat:
// the node must send its next heartbeat within HeartbeatTTL (nanoseconds in
// JSON, as Go encodes a time.Duration; Nomad's field has the same name and
// encoding).
type NodeHeartbeatHTTPResponse struct {
	HeartbeatTTL time.Duration
}

// NodeUpdateAllocsHTTPRequest is the body of POST /v1/node/{id}/allocations:
// client-side status of allocations on that node (ID, NodeID, ClientStatus,
// ClientDescription and TaskStates are read; other fields are ignored).
type NodeUpdateAllocsHTTPRequest struct {
	Allocs []*Allocation
}
