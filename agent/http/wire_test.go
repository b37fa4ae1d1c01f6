package http

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/gpulayer/gpulayer/structs"
)

// TestWireRoutes: the routes added for Nomad's API client answer in its
// shapes, and refuse bad input with a 400 naming it.
func TestWireRoutes(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"summary", "GET", "/v1/job/hello-gpu/summary", "", 200, `"gpu": {`},
		{"summary of a missing job", "GET", "/v1/job/nope/summary", "", 404, "not found"},
		{"job list stub", "GET", "/v1/jobs", "", 200, `"JobSummary": {`},
		{"evaluations", "GET", "/v1/evaluations", "", 200, `"WaitUntil": "0001-01-01T00:00:00Z"`},
		{"regions", "GET", "/v1/regions", "", 200, `"global"`},
		{"namespaces", "GET", "/v1/namespaces", "", 200, `"Name": "default"`},
		{"namespace", "GET", "/v1/namespace/default", "", 200, `"Name": "default"`},
		{"missing namespace", "GET", "/v1/namespace/other", "", 404, "namespace not found"},
		{"search all", "PUT", "/v1/search", `{"Prefix":"hel","Context":"all","AllowStale":true}`, 200, `"jobs": [`},
		{"search allocs", "PUT", "/v1/search", `{"Prefix":"a1b2","Context":"allocs"}`, 200, `"a1b2c3d4-0000"`},
		{"search bad context", "PUT", "/v1/search", `{"Prefix":"a","Context":"galaxies"}`, 400, "invalid search context"},
		{"search long prefix", "PUT", "/v1/search", `{"Prefix":"` + strings.Repeat("a", 300) + `"}`, 400, "Prefix longer than 256"},
		{"parse with Nomad's variables", "PUT", "/v1/jobs/parse",
			`{"JobHCL":"variable \"n\" {\n  type = number\n}\njob \"v\" {\n  group \"g\" {\n    count = var.n\n    task \"t\" {\n      driver = \"native\"\n    }\n  }\n}\n","Variables":"n = 3\n","Canonicalize":true}`,
			200, `"Count": 3`},
		{"parse canonicalized", "PUT", "/v1/jobs/parse", `{"JobHCL":"job \"c\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"native\"\n    }\n  }\n}\n","Canonicalize":true}`,
			200, `"Region": "global"`},
		{"parse with bad variables", "PUT", "/v1/jobs/parse", `{"JobHCL":"job \"v\" {}","Variables":"n = = 3"}`, 400, "Variables:"},
		{"restart by Nomad's path", "PUT", "/v1/client/allocation/a1b2c3d4-0000/restart", `{"TaskName":"main"}`, 200, `{}`},
		{"restart with both", "PUT", "/v1/client/allocation/a1b2c3d4-0000/restart", `{"TaskName":"main","AllTasks":true}`, 400, "exclusive"},
		{"exec without a websocket", "GET", "/v1/client/allocation/a1b2c3d4-0000/exec?task=main&command=%5B%22env%22%5D", "", 400, "WebSocket"},
		{"exec with a bad command", "GET", "/v1/client/allocation/a1b2c3d4-0000/exec?task=main&command=env", "", 400, "command parameter"},
		{"metrics json", "GET", "/v1/metrics", "", 200, `"Gauges": [`},
		{"metrics prometheus", "GET", "/v1/metrics?format=prometheus", "", 200, "# TYPE go_goroutines gauge"},
		{"metrics bad format", "GET", "/v1/metrics?format=xml", "", 400, "invalid format"},
		{"agent self", "GET", "/v1/agent/self", "", 200, `"stats": {`},
	}
	fs, fc, _ := fixture(t)
	h, err := New(Config{Server: fs, Client: &actorClient{fakeClient: fc}, MaxBodyBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := doReq(t, tc.method, ts.URL+tc.path, tc.body)
			if resp.StatusCode != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s = %d %s, want %d with %q", tc.method, tc.path, resp.StatusCode, body, tc.code, tc.want)
			}
		})
	}
}

// TestExecWebSocketProxied runs Nomad's exec protocol against an agent
// whose node does not run the allocation: the WebSocket is proxied to the
// agent of the allocation's node, stdin reaches the command and stdout,
// stderr and the exit code come back.
func TestExecWebSocketProxied(t *testing.T) {
	fs, fc, front := fixture(t)
	fs.allocs["a1b2c3d4-0000"].NodeID = "node-2"
	node2 := &structs.Node{ID: "node-2", Name: "box"}
	h2, err := New(Config{Server: fs, Client: &actorClient{fakeClient: &fakeClient{node: node2, logs: fc.logs}}})
	if err != nil {
		t.Fatal(err)
	}
	back := httptest.NewServer(h2)
	t.Cleanup(back.Close)
	node2.HTTPAddr = strings.TrimPrefix(back.URL, "http://")
	fs.nodes["node-2"] = node2

	url := "ws" + strings.TrimPrefix(front.URL, "http") + "/v1/client/allocation/a1b2c3d4-0000/exec?task=main&tty=false&command=%5B%22cat%22%5D"
	conn, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer conn.Close()
	if err := conn.WriteJSON(map[string]interface{}{"stdin": map[string]interface{}{"data": []byte("hi")}}); err != nil {
		t.Fatal(err)
	}
	if err := conn.WriteJSON(map[string]interface{}{"stdin": map[string]interface{}{"close": true}}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	for {
		var out execWSOutput
		if err := conn.ReadJSON(&out); err != nil {
			t.Fatalf("read: %v (stdout %q)", err, stdout.String())
		}
		if out.Stdout != nil {
			stdout.Write(out.Stdout.Data)
		}
		if out.Stderr != nil {
			stderr.Write(out.Stderr.Data)
		}
		if out.Exited {
			if out.Result == nil || out.Result.ExitCode != 7 {
				t.Fatalf("exit %+v", out.Result)
			}
			break
		}
	}
	if !strings.Contains(stdout.String(), "[cat] tty=false in=hi") || stderr.String() != "warning" {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
}
