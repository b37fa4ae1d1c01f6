package structs

import (
	"bytes"
	"errors"
	"testing"
)

func TestNodeWireRoundTrip(t *testing.T) {
	in := NodeFetchAllocsHTTPResponse{
		Allocs: []*NodeFetchedAlloc{{Alloc: &Allocation{ID: "a1", NodeID: "n1", JobID: "j1", ClientStatus: AllocClientStatusRunning,
			TaskStates: map[string]*TaskState{"t": {State: TaskStateRunning, StartedAt: 3, Events: []*TaskEvent{{Type: "Started", Time: 3}}}}}, JobIndex: 9}},
		Jobs: []*Job{{ID: "j1", ModifyIndex: 9, TaskGroups: []*TaskGroup{{Name: "g", Count: 2, Tasks: []*Task{{Name: "t", Driver: "native",
			Config: map[string]interface{}{"command": "/bin/true", "args": []interface{}{"-x"}}}}}}}},
	}
	raw, err := MarshalNodeWire(in)
	if err != nil {
		t.Fatal(err)
	}
	var out NodeFetchAllocsHTTPResponse
	if err := DecodeNodeWire(raw, &out); err != nil {
		t.Fatal(err)
	}
	got, err := out.AttachJobs()
	if err != nil || len(got) != 1 || got[0].Job == nil || got[0].Job.TaskGroups[0].Tasks[0].Config["command"] != "/bin/true" ||
		got[0].TaskStates["t"].Events[0].Type != "Started" {
		t.Fatalf("round trip: %+v %v", got, err)
	}
}

func TestDecodeNodeWireRefuses(t *testing.T) {
	good, err := MarshalNodeWire(NodeHeartbeatHTTPRequest{Status: "ready"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"empty", nil},
		{"truncated", good[:len(good)-1]},
		{"trailing bytes", append(append([]byte{}, good...), 0xc0)},
		{"nested past the bound", append(bytes.Repeat([]byte{0x91}, nodeWireMaxDepth+1), 0xc0)},
		{"huge length prefix", []byte{0xdd, 0x7f, 0xff, 0xff, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v interface{}
			if err := DecodeNodeWire(tc.raw, &v); !errors.Is(err, ErrDecode) {
				t.Fatalf("DecodeNodeWire = %v, want ErrDecode", err)
			}
		})
	}
	var v interface{}
	if err := DecodeNodeWire(append(bytes.Repeat([]byte{0x91}, nodeWireMaxDepth-2), 0xc0), &v); err != nil {
		t.Fatalf("nesting within the bound: %v", err)
	}
}

// FuzzDecodeNodeWire: any input decodes or returns ErrDecode, never
// panics.
func FuzzDecodeNodeWire(f *testing.F) {
	for _, v := range []interface{}{NodeHeartbeatHTTPRequest{Status: "ready"}, NodeFetchAllocsHTTPRequest{AllocIDs: []string{"a"}},
		NodeUpdateAllocsHTTPRequest{Allocs: []*Allocation{{ID: "a", TaskStates: map[string]*TaskState{"t": {State: "running"}}}}}} {
		raw, err := MarshalNodeWire(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, out := range []interface{}{&NodeUpdateAllocsHTTPRequest{}, &NodeRegisterHTTPRequest{}, new(interface{})} {
			if err := DecodeNodeWire(raw, out); err != nil && !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not wrap ErrDecode", err)
			}
		}
	})
}
