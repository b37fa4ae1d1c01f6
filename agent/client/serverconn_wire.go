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
