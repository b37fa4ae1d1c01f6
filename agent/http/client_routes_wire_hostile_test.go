package http

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// emptyMapsBody is a msgpack {"Allocs": [{}, {}, ...]} of about n bytes:
// each one-byte {} decodes into a whole structs.Allocation, so n bytes
// cost the decoder hundreds of times n.
func emptyMapsBody(n int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x81, 0xa6})
	b.WriteString("Allocs")
	k := n - 16
	b.Write([]byte{0xdd, byte(k >> 24), byte(k >> 16), byte(k >> 8), byte(k)})
	b.Write(bytes.Repeat([]byte{0x80}, k))
	return b.Bytes()
}

// TestNodeRoutesRefuseBeforeDecoding (hostile17): with ACLs off the node
// routes still need the node's own secret, checked by the handler. It was
// checked after the body was decoded, so anyone could make the server
// decode a 1 MiB msgpack body of empty maps (about 450 MiB of
// allocations, three times JSON's worst) and only then hear 403. A
// caller without the secret, or with another node's, is now refused
// before its body is read: a malformed body gets 403, not 400, and the
// hostile body costs the server almost nothing.
func TestNodeRoutesRefuseBeforeDecoding(t *testing.T) {
	fs, _, _ := fixture(t)
	fns := &fakeNodeServer{fakeServer: fs}
	fs.nodes["node-2"] = &structs.Node{ID: "node-2", Name: "other", SecretID: "other-secret"}
	h, err := New(Config{Server: fns})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	send := func(method, path, secret string, body []byte) int {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", structs.ContentTypeNodeMsgpack)
		req.Header.Set("Accept", structs.ContentTypeNodeMsgpack)
		if secret != "" {
			req.Header.Set(structs.HeaderNodeSecret, secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	routes := []struct{ method, path string }{
		{"PUT", "/v1/node/node-1/heartbeat"},
		{"POST", "/v1/node/node-1/allocations"},
		{"POST", "/v1/node/node-1/client-allocs/fetch"},
	}
	for _, rt := range routes {
		for _, secret := range []string{"", "other-secret", "wrong"} {
			if code := send(rt.method, rt.path, secret, []byte{0xde, 0xff}); code != http.StatusForbidden {
				t.Errorf("%s %s with secret %q and a malformed body = %d, want 403 before the body is read", rt.method, rt.path, secret, code)
			}
		}
	}
	hostile := emptyMapsBody(1<<20 - 64)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, secret := range []string{"", "other-secret"} {
		if code := send("POST", "/v1/node/node-1/allocations", secret, hostile); code != http.StatusForbidden {
			t.Errorf("hostile body with secret %q = %d, want 403", secret, code)
		}
	}
	runtime.ReadMemStats(&after)
	// Two refused requests: the server must not have decoded ~450 MiB
	// each. 64 MiB leaves room for the test's own sends and the runtime.
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("two refused 1 MiB bodies allocated %d MiB in the server", got>>20)
	}
	// The node itself still gets its answer (the body is read once the
	// secret is known good).
	if code := send("PUT", "/v1/node/node-1/heartbeat", "s3cret", mustWire(t, structs.NodeHeartbeatHTTPRequest{Status: structs.NodeStatusReady})); code != 200 {
		t.Errorf("heartbeat of the node itself = %d", code)
	}
	if code := send("PUT", "/v1/node/node-1/heartbeat", "s3cret", []byte{0xde, 0xff}); code != http.StatusBadRequest {
		t.Errorf("the node's own malformed heartbeat = %d, want 400", code)
	}
}
