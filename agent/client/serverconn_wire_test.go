package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// wireNodeAPI answers heartbeats and status reports in msgpack when
// asked (speaks set) and records each request's Content-Type and Accept.
type wireNodeAPI struct {
	speaks bool
	mu     sync.Mutex
	seen   []string // "content-type|accept" per request
	allocs []*structs.Allocation
}

func (f *wireNodeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, r.Header.Get("Content-Type")+"|"+r.Header.Get("Accept"))
	var out interface{} = struct{}{}
	switch {
	case strings.HasSuffix(r.URL.Path, "/heartbeat"):
		out = structs.NodeHeartbeatHTTPResponse{HeartbeatTTL: 9 * time.Second}
	case strings.HasSuffix(r.URL.Path, "/allocations"):
		var req structs.NodeUpdateAllocsHTTPRequest
		var err error
		if r.Header.Get("Content-Type") == structs.ContentTypeNodeMsgpack {
			err = structs.DecodeNodeWire(raw, &req)
		} else {
			err = json.Unmarshal(raw, &req)
		}
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.allocs = append(f.allocs, req.Allocs...)
	}
	if f.speaks && strings.Contains(r.Header.Get("Accept"), structs.ContentTypeNodeMsgpack) {
		raw, _ := structs.MarshalNodeWire(out)
		w.Header().Set("Content-Type", structs.ContentTypeNodeMsgpack)
		_, _ = w.Write(raw)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// TestHTTPServerConnNegotiatesMsgpack: the node routes ask for msgpack,
// send msgpack bodies once the server has answered in it, and stay JSON
// with a server that does not (or a JSONOnly connection).
func TestHTTPServerConnNegotiatesMsgpack(t *testing.T) {
	accept := structs.ContentTypeNodeMsgpack + ", application/json"
	for _, tc := range []struct {
		name     string
		speaks   bool
		jsonOnly bool
		want     []string
	}{
		{"server speaks msgpack", true, false, []string{"application/json|" + accept, structs.ContentTypeNodeMsgpack + "|" + accept, structs.ContentTypeNodeMsgpack + "|" + accept}},
		{"server speaks JSON", false, false, []string{"application/json|" + accept, "application/json|" + accept, "application/json|" + accept}},
		{"JSON only", true, true, []string{"application/json|", "application/json|", "application/json|"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &wireNodeAPI{speaks: tc.speaks}
			ts := httptest.NewServer(f)
			defer ts.Close()
			conn, err := NewHTTPServerConn(HTTPServerConnConfig{Servers: []string{ts.URL}, JSONOnly: tc.jsonOnly})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if ttl, err := conn.NodeUpdateStatus(ctx, "n1", structs.NodeStatusReady); err != nil || ttl != 9*time.Second {
				t.Fatalf("heartbeat: %v %v", ttl, err)
			}
			for i := 0; i < 2; i++ {
				up := []*structs.Allocation{{ID: "a1", NodeID: "n1", ClientStatus: structs.AllocClientStatusRunning}}
				if err := conn.UpdateAllocs(ctx, up); err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if !reflect.DeepEqual(f.seen, tc.want) {
				t.Fatalf("Content-Type|Accept per request:\n got %q\nwant %q", f.seen, tc.want)
			}
			if len(f.allocs) != 2 || f.allocs[1].ClientStatus != structs.AllocClientStatusRunning {
				t.Fatalf("server got %+v", f.allocs)
			}
		})
	}
}

// TestAllocUpdateWireKeepsClientFields: every field of a status report
// the server reads (server.UpdateAllocs) arrives, in either encoding,
// with the name and type it has in structs.Allocation.
func TestAllocUpdateWireKeepsClientFields(t *testing.T) {
	at := reflect.TypeOf(structs.Allocation{})
	wt := reflect.TypeOf(allocUpdateWire{})
	for i := 0; i < wt.NumField(); i++ {
		wf := wt.Field(i)
		af, ok := at.FieldByName(wf.Name)
		if !ok || af.Type != wf.Type {
			t.Errorf("allocUpdateWire.%s (%s): structs.Allocation has %v %v", wf.Name, wf.Type, ok, af.Type)
		}
	}
	healthy := true
	in := &structs.Allocation{ID: "a1", NodeID: "n1", ClientStatus: structs.AllocClientStatusComplete, ClientDescription: "done",
		TaskStates:       map[string]*structs.TaskState{"t": {State: structs.TaskStateDead, FinishedAt: 4, Events: []*structs.TaskEvent{{Type: "Terminated", Time: 4, Details: map[string]string{"exit_code": "0"}}}}},
		Outputs:          []*structs.ArtifactRef{{Path: "out/model.bin", Digest: strings.Repeat("ab", 32), Size: 3}},
		LogArchive:       strings.Repeat("cd", 32),
		DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: &healthy, Timestamp: 5},
		EndpointMember:   &structs.EndpointMemberStatus{},
		// Not read from a report: left off the wire.
		JobID: "j1", AllocModifyIndex: 9,
	}
	want := &structs.Allocation{ID: in.ID, NodeID: in.NodeID, ClientStatus: in.ClientStatus, ClientDescription: in.ClientDescription,
		TaskStates: in.TaskStates, Outputs: in.Outputs, LogArchive: in.LogArchive, DeploymentStatus: in.DeploymentStatus, EndpointMember: in.EndpointMember}
	body := newAllocUpdatesWire([]*structs.Allocation{in})
	for _, enc := range []string{"json", "msgpack"} {
		var got structs.NodeUpdateAllocsHTTPRequest
		var err error
		if enc == "json" {
			var raw []byte
			if raw, err = json.Marshal(body); err == nil {
				err = json.Unmarshal(raw, &got)
			}
		} else {
			var raw []byte
			if raw, err = structs.MarshalNodeWire(body); err == nil {
				err = structs.DecodeNodeWire(raw, &got)
			}
		}
		if err != nil || len(got.Allocs) != 1 {
			t.Fatalf("%s: %v %+v", enc, err, got)
		}
		if !reflect.DeepEqual(got.Allocs[0], want) {
			t.Errorf("%s: server reads\n%+v\nwant\n%+v", enc, got.Allocs[0], want)
		}
	}
}
