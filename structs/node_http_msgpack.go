package structs

import (
	"bytes"
	"fmt"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// ContentTypeNodeMsgpack is the media type of the node routes' binary
// encoding: msgpack of the same Go types as their JSON (field names as in
// Raft entries, MsgpackHandle's settings). A client agent sends it in
// Accept and, once a server has answered in it, as its request
// Content-Type; a server answers in it only when asked, so API users and
// Nomad's tools keep JSON. Only the client's node routes (register,
// heartbeat, allocations, client-allocs and fetch) speak it.
const ContentTypeNodeMsgpack = "application/vnd.gpulayer.node+msgpack"

// Bounds of a decoded node route message: nesting (as MaxJSONBodyDepth
// bounds the JSON bodies) and the elements a collection is allocated for
// before they are read (a length prefix cannot make the decoder allocate
// more than its body holds).
const (
	nodeWireMaxDepth   = 64
	nodeWireMaxInitLen = 4096
)

// nodeWireHandle is MsgpackHandle with the bounds of an input read from
// the network.
var nodeWireHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	h.WriteExt = true
	h.MapType = mapStringInterfaceType
	h.MaxDepth = nodeWireMaxDepth
	h.MaxInitLen = nodeWireMaxInitLen
	return h
}()

// EncodeNodeWire writes v to w in ContentTypeNodeMsgpack.
func EncodeNodeWire(w io.Writer, v interface{}) error {
	if err := codec.NewEncoder(w, nodeWireHandle).Encode(v); err != nil {
		return fmt.Errorf("encode msgpack: %w", err)
	}
	return nil
}

// MarshalNodeWire returns v in ContentTypeNodeMsgpack.
func MarshalNodeWire(v interface{}) ([]byte, error) {
	var buf bytes.Buffer
	if err := EncodeNodeWire(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeNodeWire reads one ContentTypeNodeMsgpack value, the whole of raw,
// into out. Malformed input, nesting deeper than 64 levels and bytes after
// the value return an error wrapping ErrDecode; it never panics.
func DecodeNodeWire(raw []byte, out interface{}) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: panic in msgpack decoder: %v", ErrDecode, r)
		}
	}()
	if len(raw) == 0 {
		return fmt.Errorf("%w: empty msgpack body", ErrDecode)
	}
	dec := codec.NewDecoderBytes(raw, nodeWireHandle)
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if n := dec.NumBytesRead(); n != len(raw) {
		return fmt.Errorf("%w: %d bytes after the msgpack value", ErrDecode, len(raw)-n)
	}
	return nil
}
