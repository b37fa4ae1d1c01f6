package fsm

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// DecodeMessage splits a log entry into its message type and request: the
// first byte is the structs.MessageType, the rest the msgpack of the
// matching request struct (for JobRegisterRequestType, a
// *structs.JobRegisterRequest, and so on). The type returned keeps
// structs.IgnoreUnknownTypeFlag when it was set.
//
// Errors (it never panics): ErrEmptyMessage for an empty buf;
// ErrUnknownMessageType for a type this FSM does not know, unless the type
// carries structs.IgnoreUnknownTypeFlag, in which case it returns (t, nil,
// nil); an error wrapping structs.ErrDecode for a malformed body.
func DecodeMessage(buf []byte) (structs.MessageType, interface{}, error) {
	if len(buf) == 0 {
		return 0, nil, ErrEmptyMessage
	}
	t := structs.MessageType(buf[0])
	base := t &^ structs.IgnoreUnknownTypeFlag
	dec, ok := decoders[base]
	if !ok {
		if t&structs.IgnoreUnknownTypeFlag != 0 {
			return t, nil, nil
		}
		return t, nil, fmt.Errorf("%w: %d", ErrUnknownMessageType, uint8(t))
	}
	req, err := dec(buf[1:])
	if err != nil {
		return t, nil, fmt.Errorf("fsm: decode %s: %w", base, err)
	}
	return t, req, nil
}
