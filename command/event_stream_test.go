package command

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// observabilityAPI serves /v1/event/stream and /v1/client/stats itself and
// passes everything else to the fake API.
func observabilityAPI(t *testing.T, stream func(w http.ResponseWriter, r *http.Request)) *httptest.Server {
	t.Helper()
	fake := newFakeAPI().serve(t)
	target, _ := url.Parse(fake.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	mux.HandleFunc("GET /v1/event/stream", stream)
	mux.HandleFunc("GET /v1/client/stats", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(&api.NodeDeviceStats{NodeID: "ef567890-0000-0000-0000-000000000000", SampledAt: 1, Devices: []*api.DeviceStats{
			{ID: "GPU-aaaa", UtilizationPercent: 87.4, MemoryUsedMiB: 40000, MemoryTotalMiB: 81559, Healthy: true},
			{ID: "GPU-cccc", Error: "Xid 79", Healthy: false},
		}})
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func TestEventStreamCommand(t *testing.T) {
	var gotQuery url.Values
	ts := observabilityAPI(t, func(w http.ResponseWriter, r *http.Request) {
		gotQuery = r.URL.Query()
		if r.URL.Query().Get("index") == "999" {
			w.WriteHeader(http.StatusGone)
			_, _ = w.Write([]byte(`{"error":"events no longer held"}`))
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		lines := []string{
			`{}`,
			`{"Index":12,"Events":[{"Topic":"Job","Type":"JobRegistered","Key":"hello-gpu","Index":12,"Payload":{"Job":{"ID":"hello-gpu","Status":"pending"}}}]}`,
			`{"Index":14,"Events":[{"Topic":"Allocation","Type":"AllocationUpdated","Key":"abcd1234-5678","Index":14,"Payload":{"Allocation":{"ID":"abcd1234-5678","JobID":"hello-gpu","DesiredStatus":"run","ClientStatus":"running"}}},` +
				`{"Topic":"Evaluation","Type":"EvaluationUpdated","Key":"1a2b3c4d-0000","Index":14,"Payload":{"Evaluation":{"JobID":"hello-gpu","TriggeredBy":"job-register","Status":"complete"}}}]}`,
			`{"Error":"index 3 is older than the event buffer"}`,
		}
		for _, l := range lines {
			_, _ = w.Write([]byte(l + "\n"))
		}
	})

	r := runCmd(t, ts.URL, "event", "stream", "-index=10", "-topic=Job", "-topic=Allocation:hello-gpu")
	if gotQuery.Get("index") != "10" || strings.Join(gotQuery["topic"], ",") != "Job,Allocation:hello-gpu" {
		t.Fatalf("query %v", gotQuery)
	}
	want := []string{
		"12     Job        JobRegistered      hello-gpu  status pending",
		"14     Allocation AllocationUpdated  abcd1234   job hello-gpu, desired run, client running",
		"14     Evaluation EvaluationUpdated  1a2b3c4d   job hello-gpu, job-register, complete",
	}
	if got := strings.Split(strings.TrimSpace(r.out), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("output:\n%s\nwant:\n%s", r.out, strings.Join(want, "\n"))
	}
	if r.code != 1 || !strings.Contains(r.err, "older than the event buffer") {
		t.Fatalf("code %d, err %q: a stream the server ends is an error", r.code, r.err)
	}

	j := runCmd(t, ts.URL, "event", "stream", "-json")
	if lines := strings.Split(strings.TrimSpace(j.out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], `{"Index":12,`) {
		t.Fatalf("-json output %q", j.out)
	}

	gone := runCmd(t, ts.URL, "event", "stream", "-index=999")
	if gone.code != 1 || !strings.Contains(gone.err, "no longer held") {
		t.Fatalf("gone: %d %q", gone.code, gone.err)
	}
	bad := runCmd(t, ts.URL, "event", "stream", "extra")
	if bad.code == 0 || !strings.Contains(bad.err, "takes no arguments") {
		t.Fatalf("extra argument: %d %q", bad.code, bad.err)
	}
}

// TestFormatEventEndpointAlias: a promotion reads as where the alias now
// resolves, a demotion as where it was removed from (not as "->").
func TestFormatEventEndpointAlias(t *testing.T) {
	payload := json.RawMessage(`{"Name":"llm.primary","Endpoint":"llm-small","JobID":"endpoint-native","PromotedBy":"anonymous"}`)
	for typ, want := range map[string]string{
		api.EventEndpointAliasPromoted: "17     EndpointAlias EndpointAliasPromoted llm.primary -> endpoint llm-small (job endpoint-native), by anonymous",
		api.EventEndpointAliasDemoted:  "17     EndpointAlias EndpointAliasDemoted llm.primary removed from endpoint llm-small (job endpoint-native)",
	} {
		e := &api.Event{Topic: api.TopicEndpointAlias, Type: typ, Key: "llm.primary", Index: 17,
			Payload: map[string]json.RawMessage{"EndpointAlias": payload}}
		if got := formatEvent(e); got != want {
			t.Errorf("%s:\n got %q\nwant %q", typ, got, want)
		}
	}
}

func TestNodeStatusVerboseListsGPUs(t *testing.T) {
	ts := observabilityAPI(t, func(w http.ResponseWriter, r *http.Request) {})
	r := runCmd(t, ts.URL, "node", "status", "-verbose")
	if r.code != 0 {
		t.Fatalf("code %d: %s", r.code, r.err)
	}
	for _, want := range []string{
		"GPUs of laptop (ef567890)",
		"Utilization", "Memory Used",
		"GPU-aaaa", "87%", "40000 MiB", "abcd1234",
		"GPU-bbbb", "<free>",
		"GPU-cccc", "unhealthy (Xid 79)", "<none>",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
}

func TestGPUHealthColumn(t *testing.T) {
	cases := []struct {
		in   api.DeviceInstance
		want string
	}{
		{api.DeviceInstance{Healthy: true, HealthDescription: "healthy"}, "healthy"},
		{api.DeviceInstance{HealthDescription: "Xid 79"}, "unhealthy (Xid 79)"},
		{api.DeviceInstance{HealthDescription: "unhealthy: XID 79 (GPU has fallen off the bus) at 2026-12-01T02:10:00Z"},
			"unhealthy (XID 79 (GPU has fallen off the bus) at 2026-12-01T02:10:00Z)"},
		{api.DeviceInstance{HealthDescription: "unhealthy"}, "unhealthy"},
		{api.DeviceInstance{}, "unhealthy"},
	}
	for _, c := range cases {
		if got := gpuHealth(&c.in); got != c.want {
			t.Errorf("gpuHealth(%q) = %q, want %q", c.in.HealthDescription, got, c.want)
		}
	}
}
