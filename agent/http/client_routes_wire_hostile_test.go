package http

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
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

// TestMsgpackOnlyOnNodeRoutes (hostile17): a route other than the node
// routes reads JSON whatever the Content-Type says: a msgpack job body
// sent to PUT /v1/jobs is a 400 that registers nothing, and an Accept
// naming msgpack still gets JSON. The attack held.
func TestMsgpackOnlyOnNodeRoutes(t *testing.T) {
	fs, _, ts := fixture(t)
	job := &structs.Job{ID: "wire-job", Name: "wire-job", Type: "batch", TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1,
		Tasks: []*structs.Task{{Name: "t", Driver: "native"}}}}}
	body := mustWire(t, map[string]interface{}{"Job": job})
	req, err := http.NewRequest("PUT", ts.URL+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", structs.ContentTypeNodeMsgpack)
	req.Header.Set("Accept", structs.ContentTypeNodeMsgpack)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("msgpack job body = %d %q, want a JSON 400", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	fs.mu.Lock()
	registered := fs.lastJob
	fs.mu.Unlock()
	if registered != nil {
		t.Fatalf("a msgpack body registered job %q", registered.ID)
	}
	code, raw, hdr := nodeWireReq(t, "GET", ts.URL+"/v1/jobs", nil)
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		t.Fatalf("GET /v1/jobs asking for msgpack = %d %q %.40q, want JSON", code, hdr.Get("Content-Type"), raw)
	}
}
