package http

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// statsClient is a fake client with GPU telemetry.
type statsClient struct {
	fakeClient
	stats *structs.NodeDeviceStats
}

func (c *statsClient) DeviceStats() *structs.NodeDeviceStats { return c.stats.Copy() }

func TestClientStatsLocalAndProxied(t *testing.T) {
	remoteNode := &structs.Node{ID: "node-2", Name: "remote"}
	remote := &statsClient{fakeClient: fakeClient{node: remoteNode}, stats: &structs.NodeDeviceStats{NodeID: "node-2", SampledAt: 7,
		Devices: []*structs.DeviceStats{{ID: "GPU-r0", UtilizationPercent: 66, MemoryUsedMiB: 1000, MemoryTotalMiB: 8000, Healthy: true}}}}
	remoteAPI, err := New(Config{Client: remote})
	if err != nil {
		t.Fatal(err)
	}
	remoteTS := httptest.NewServer(remoteAPI)
	t.Cleanup(remoteTS.Close)

	fs := newFakeServer()
	fs.nodes["node-1"] = &structs.Node{ID: "node-1"}
	fs.nodes["node-2"] = &structs.Node{ID: "node-2", HTTPAddr: strings.TrimPrefix(remoteTS.URL, "http://")}
	fs.nodes["node-3"] = &structs.Node{ID: "node-3", HTTPAddr: "127.0.0.1:1"} // nobody listens
	fs.nodes["node-4"] = &structs.Node{ID: "node-4"}                          // no address
	local := &statsClient{fakeClient: fakeClient{node: fs.nodes["node-1"]}, stats: &structs.NodeDeviceStats{NodeID: "node-1", SampledAt: 5,
		Devices: []*structs.DeviceStats{{ID: "GPU-l0", UtilizationPercent: 12}}}}
	h, err := New(Config{Server: fs, Client: local})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)

	cases := []struct {
		query    string
		wantCode int
		wantDev  string
		wantErr  string
	}{
		{"", 200, "GPU-l0", ""},
		{"?node_id=node-1", 200, "GPU-l0", ""},
		{"?node_id=node-2", 200, "GPU-r0", ""},
		{"?node_id=node-3", 502, "", "read telemetry of node"},
		{"?node_id=node-4", 404, "", "no HTTP address"},
		{"?node_id=nope", 404, "", "not found"},
	}
	for _, tc := range cases {
		resp, body := doReq(t, "GET", ts.URL+"/v1/client/stats"+tc.query, "")
		if resp.StatusCode != tc.wantCode {
			t.Errorf("%s: status %d, want %d: %s", tc.query, resp.StatusCode, tc.wantCode, body)
			continue
		}
		if tc.wantDev != "" {
			var st structs.NodeDeviceStats
			if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Devices) != 1 || st.Devices[0].ID != tc.wantDev {
				t.Errorf("%s: %s (%v)", tc.query, body, err)
			}
		}
		if tc.wantErr != "" && !strings.Contains(body, tc.wantErr) {
			t.Errorf("%s: body %s lacks %q", tc.query, body, tc.wantErr)
		}
	}
	// A forwarded request is never forwarded again.
	req, _ := http.NewRequest("GET", remoteTS.URL+"/v1/client/stats?node_id=node-9", nil)
	req.Header.Set(headerForwarded, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("forwarded request for another node: %s", resp.Status)
	}

	// The nodes page marks the remote node for the script to fill in.
	_, page := doReq(t, "GET", ts.URL+"/ui/nodes", "")
	if !strings.Contains(page, `data-stats-node="node-2"`) || strings.Contains(page, `data-stats-node="node-1"`) {
		t.Errorf("nodes page: remote node not marked, or local node marked:\n%s", page)
	}
}
