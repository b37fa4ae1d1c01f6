package http

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// nodeWireReq sends body (msgpack when it is not a string) with Accept
// set to msgpack and returns the status, the answer's bytes and headers.
func nodeWireReq(t *testing.T, method, url string, body interface{}) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd, ctype = bytes.NewReader(b), structs.ContentTypeNodeMsgpack
	default:
		raw, err := structs.MarshalNodeWire(b)
		if err != nil {
			t.Fatal(err)
		}
		rd, ctype = bytes.NewReader(raw), structs.ContentTypeNodeMsgpack
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", structs.ContentTypeNodeMsgpack+", application/json")
	req.Header.Set(structs.HeaderNodeSecret, "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw, resp.Header
}

// TestNodeRoutesMsgpack: a node route asked for msgpack answers in it and
// reads a msgpack body; errors stay JSON.
func TestNodeRoutesMsgpack(t *testing.T) {
	fns, ts := nodeFixture(t)
	fns.mu.Lock()
	fns.allocs["mine"] = &structs.Allocation{ID: "mine", NodeID: "node-1", AllocModifyIndex: 7}
	fns.mu.Unlock()

	code, raw, hdr := nodeWireReq(t, "PUT", ts.URL+"/v1/node/node-1/heartbeat", structs.NodeHeartbeatHTTPRequest{Status: structs.NodeStatusReady})
	var hb structs.NodeHeartbeatHTTPResponse
	if code != 200 || hdr.Get("Content-Type") != structs.ContentTypeNodeMsgpack || structs.DecodeNodeWire(raw, &hb) != nil || hb.HeartbeatTTL <= 0 {
		t.Fatalf("heartbeat = %d %q %q", code, hdr.Get("Content-Type"), raw)
	}

	code, raw, _ = nodeWireReq(t, "GET", ts.URL+"/v1/node/node-1/client-allocs", nil)
	var ids structs.NodeClientAllocsHTTPResponse
	if code != 200 || structs.DecodeNodeWire(raw, &ids) != nil || ids.Allocs["mine"] != 7 {
		t.Fatalf("client-allocs = %d %q (%+v)", code, raw, ids)
	}

	code, raw, _ = nodeWireReq(t, "POST", ts.URL+"/v1/node/node-1/client-allocs/fetch", structs.NodeFetchAllocsHTTPRequest{AllocIDs: []string{"mine", "other-alloc"}})
	var got structs.NodeFetchAllocsHTTPResponse
	if code != 200 || structs.DecodeNodeWire(raw, &got) != nil || len(got.Allocs) != 1 || got.Allocs[0].Alloc.ID != "mine" {
		t.Fatalf("fetch = %d %q", code, raw)
	}

	upd := structs.NodeUpdateAllocsHTTPRequest{Allocs: []*structs.Allocation{{ID: "mine", NodeID: "node-1", ClientStatus: structs.AllocClientStatusRunning,
		TaskStates: map[string]*structs.TaskState{"t": {State: structs.TaskStateRunning, StartedAt: 5}}}}}
	if code, raw, _ = nodeWireReq(t, "POST", ts.URL+"/v1/node/node-1/allocations", upd); code != 200 {
		t.Fatalf("update = %d %q", code, raw)
	}
	fns.mu.Lock()
	if len(fns.updates) != 1 || fns.updates[0].ClientStatus != structs.AllocClientStatusRunning || fns.updates[0].TaskStates["t"].StartedAt != 5 {
		t.Fatalf("updates %+v", fns.updates)
	}
	fns.mu.Unlock()

	// Errors are JSON, and a refused body reaches no server call.
	for _, tc := range []struct {
		name string
		body interface{}
		code int
		want string
	}{
		{"malformed msgpack", []byte{0xde, 0xff}, 400, "malformed msgpack body"},
		{"trailing bytes", append(mustWire(t, upd), 0xc0), 400, "after the msgpack value"},
		{"too deep", deepMsgpack(100), 400, "malformed msgpack body"},
		{"too large", mustWire(t, structs.NodeUpdateAllocsHTTPRequest{Allocs: []*structs.Allocation{{ID: strings.Repeat("a", 5000)}}}), 413, "larger than"},
		{"not this node's", structs.NodeUpdateAllocsHTTPRequest{Allocs: []*structs.Allocation{{ID: "other-alloc", NodeID: "node-2"}}}, 400, "is not node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, raw, hdr := nodeWireReq(t, "POST", ts.URL+"/v1/node/node-1/allocations", tc.body)
			if code != tc.code || !strings.Contains(string(raw), tc.want) || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
				t.Fatalf("= %d %q %q, want %d with %q in JSON", code, hdr.Get("Content-Type"), raw, tc.code, tc.want)
			}
		})
	}
	fns.mu.Lock()
	defer fns.mu.Unlock()
	if len(fns.updates) != 1 {
		t.Fatalf("a refused update reached the server: %+v", fns.updates)
	}
}

// TestNodeRoutesJSONByDefault: without Accept naming msgpack a node route
// answers JSON, as API users and Nomad's tools expect.
func TestNodeRoutesJSONByDefault(t *testing.T) {
	_, ts := nodeFixture(t)
	code, body, hdr := nodeReq(t, "PUT", ts.URL+"/v1/node/node-1/heartbeat", "s3cret", `{"Status":"ready"}`)
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || !strings.Contains(body, "HeartbeatTTL") {
		t.Fatalf("heartbeat = %d %q %s", code, hdr.Get("Content-Type"), body)
	}
}

func mustWire(t *testing.T, v interface{}) []byte {
	t.Helper()
	raw, err := structs.MarshalNodeWire(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// deepMsgpack is n nested one-element arrays (fixarray 0x91) around nil.
func deepMsgpack(n int) []byte {
	return append(bytes.Repeat([]byte{0x91}, n), 0xc0)
}
