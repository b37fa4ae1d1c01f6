package client

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/gpulayer/gpulayer/structs"
)

// wire is how one request of the HTTP server connection is encoded.
type wire int

const (
	// wireJSON sends and asks for JSON: every route but the node routes,
	// and the node routes of a JSONOnly connection.
	wireJSON wire = iota
	// wireAccept sends a JSON body and asks for a
	// structs.ContentTypeNodeMsgpack answer: a node route to a server not
	// yet known to speak it.
	wireAccept
	// wireMsgpack sends and asks for msgpack: a node route to a server
	// that has answered in it.
	wireMsgpack
)

// maxMsgpackAnswer bounds a msgpack answer a client reads (256 MiB): a
// fetch of structs.MaxFetchAllocs allocations and their jobs is far less.
const maxMsgpackAnswer = 256 << 20

// payloads encodes one call's body once per encoding it is sent in (a
// call may try several servers).
type payloads struct {
	body          interface{}
	json, msgpack []byte
}

// get returns the body in msgpack or JSON; nil when there is no body.
func (p *payloads) get(msgpack bool) ([]byte, error) {
	if p.body == nil {
		return nil, nil
	}
	var err error
	switch {
	case msgpack && p.msgpack == nil:
		if p.msgpack, err = structs.MarshalNodeWire(p.body); err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
	case !msgpack && p.json == nil:
		if p.json, err = json.Marshal(p.body); err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
	}
	if msgpack {
		return p.msgpack, nil
	}
	return p.json, nil
}

// decodeMsgpackAnswer reads a msgpack answer of at most maxMsgpackAnswer
// bytes into out.
func decodeMsgpackAnswer(r io.Reader, out interface{}) error {
	raw, err := io.ReadAll(io.LimitReader(r, maxMsgpackAnswer+1))
	if err != nil {
		return err
	}
	if len(raw) > maxMsgpackAnswer {
		return fmt.Errorf("answer larger than %d bytes", maxMsgpackAnswer)
	}
	return structs.DecodeNodeWire(raw, out)
}

// allocUpdateWire is one allocation of a status report (POST
// /v1/node/{id}/allocations) as sent: the fields of structs.Allocation the
// server reads from a client's report (server.UpdateAllocs), under the
// same names, so either encoding decodes into structs.Allocation on the
// server. The rest of an Allocation (its resources, indexes, and dozens
// of zero fields) stays off the wire: it was most of every report's bytes
// and of the server's time decoding it.
type allocUpdateWire struct {
	ID                string
	NodeID            string
	ClientStatus      string
	ClientDescription string                         `json:",omitempty" codec:",omitempty"`
	TaskStates        map[string]*structs.TaskState  `json:",omitempty" codec:",omitempty"`
	Outputs           []*structs.ArtifactRef         `json:",omitempty" codec:",omitempty"`
	LogArchive        string                         `json:",omitempty" codec:",omitempty"`
	DeploymentStatus  *structs.AllocDeploymentStatus `json:",omitempty" codec:",omitempty"`
	EndpointMember    *structs.EndpointMemberStatus  `json:",omitempty" codec:",omitempty"`
}

// allocUpdatesWire is the body of POST /v1/node/{id}/allocations as sent
// (structs.NodeUpdateAllocsHTTPRequest, slim).
type allocUpdatesWire struct {
	Allocs []*allocUpdateWire
}

// newAllocUpdatesWire returns the report of allocs.
func newAllocUpdatesWire(allocs []*structs.Allocation) allocUpdatesWire {
	out := allocUpdatesWire{Allocs: make([]*allocUpdateWire, len(allocs))}
	for i, a := range allocs {
		out.Allocs[i] = &allocUpdateWire{ID: a.ID, NodeID: a.NodeID, ClientStatus: a.ClientStatus,
			ClientDescription: a.ClientDescription, TaskStates: a.TaskStates, Outputs: a.Outputs,
			LogArchive: a.LogArchive, DeploymentStatus: a.DeploymentStatus, EndpointMember: a.EndpointMember}
	}
	return out
}
