package http

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// fixture returns a fake server with one job, alloc, eval and node, a fake
// client on that node, and an httptest server serving the API.
func fixture(t *testing.T) (*fakeServer, *fakeClient, *httptest.Server) {
	t.Helper()
	fs := newFakeServer()
	job := &structs.Job{ID: "hello-gpu", Name: "hello-gpu", Type: "batch", Priority: 50,
		TaskGroups: []*structs.TaskGroup{{Name: "gpu", Count: 1, Tasks: []*structs.Task{{Name: "main", Driver: "native"}}}}}
	fs.jobs[job.ID] = job
	fs.allocs["a1b2c3d4-0000"] = &structs.Allocation{ID: "a1b2c3d4-0000", JobID: job.ID, Job: job, TaskGroup: "gpu", NodeID: "node-1"}
	fs.evals["e1"] = &structs.Evaluation{ID: "e1", JobID: job.ID, Status: "complete"}
	fs.nodes["node-1"] = &structs.Node{ID: "node-1", Name: "laptop", SecretID: "s3cret"}
	fc := &fakeClient{node: fs.nodes["node-1"], logs: map[string]string{"a1b2c3d4-0000/main/stdout": "hello\n", "a1b2c3d4-0000/main/stderr": "oops\n"}}
	h, err := New(Config{Server: fs, Client: fc, MaxBodyBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return fs, fc, ts
}

func doReq(t *testing.T, method, url, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

const jobBody = `{"Job":{"ID":"hello-gpu","Name":"hello-gpu","Type":"batch","TaskGroups":[{"Name":"gpu","Count":1,"Tasks":[{"Name":"main","Driver":"native","Resources":{"CPU":500,"MemoryMB":256,"Devices":[{"Name":"nvidia/gpu","Count":1}]}}]}]}}`

func TestRoutes(t *testing.T) {
	cases := []struct {
		name     string
		method   string
		path     string
		body     string
		errs     map[string]error
		wantCode int
		// want is a substring of the body.
		want string
	}{
		{name: "register put", method: "PUT", path: "/v1/jobs", body: jobBody, wantCode: 200, want: `"EvalID": "eval-hello-gpu"`},
		{name: "register post", method: "POST", path: "/v1/jobs", body: jobBody, wantCode: 200, want: `"Index": 7`},
		{name: "register no job", method: "PUT", path: "/v1/jobs", body: `{}`, wantCode: 400, want: "no Job"},
		{name: "register empty body", method: "PUT", path: "/v1/jobs", wantCode: 400, want: "body is empty"},
		{name: "register malformed", method: "PUT", path: "/v1/jobs", body: `{"Job": {`, wantCode: 400, want: "malformed JSON"},
		{name: "register wrong type", method: "PUT", path: "/v1/jobs", body: `{"Job": {"Priority": "high"}}`, wantCode: 400, want: `Job.Priority`},
		{name: "register trailing", method: "PUT", path: "/v1/jobs", body: jobBody + `{}`, wantCode: 400, want: "data after"},
		{name: "register invalid", method: "PUT", path: "/v1/jobs", body: jobBody, errs: map[string]error{"JobRegister": &structs.ValidationError{Problems: []string{"type: bad"}}}, wantCode: 400, want: "type: bad"},
		{name: "register not leader", method: "PUT", path: "/v1/jobs", body: jobBody, errs: map[string]error{"JobRegister": fmt.Errorf("apply: %w", structs.ErrNotLeader)}, wantCode: 503, want: "not the leader"},
		{name: "register no leader", method: "PUT", path: "/v1/jobs", body: jobBody, errs: map[string]error{"JobRegister": structs.ErrNoLeader}, wantCode: 503},
		{name: "register denied", method: "PUT", path: "/v1/jobs", body: jobBody, errs: map[string]error{"JobRegister": structs.ErrPermissionDenied}, wantCode: 403},
		{name: "register internal", method: "PUT", path: "/v1/jobs", body: jobBody, errs: map[string]error{"JobRegister": errors.New("disk full")}, wantCode: 500, want: "disk full"},
		{name: "parse", method: "POST", path: "/v1/jobs/parse", body: `{"JobHCL": "job \"x\" {\n group \"g\" {\n task \"t\" {\n driver = \"native\"\n }\n }\n}\n"}`, wantCode: 200, want: `"ID": "x"`},
		{name: "parse error", method: "POST", path: "/v1/jobs/parse", body: `{"JobHCL": "job \"x\" {\n  bogus = \n}\n"}`, wantCode: 400, want: "job.hcl:"},
		{name: "parse error filename", method: "POST", path: "/v1/jobs/parse", body: `{"JobHCL": "job {", "Filename": "mine.hcl"}`, wantCode: 400, want: "mine.hcl:1:"},
		{name: "parse no hcl", method: "POST", path: "/v1/jobs/parse", body: `{}`, wantCode: 400, want: "no JobHCL"},
		{name: "parse get", method: "GET", path: "/v1/jobs/parse", wantCode: 405, want: "not allowed"},
		{name: "list jobs", method: "GET", path: "/v1/jobs", wantCode: 200, want: `"ID": "hello-gpu"`},
		{name: "list jobs prefix none", method: "GET", path: "/v1/jobs?prefix=zzz", wantCode: 200, want: "[]"},
		{name: "get job", method: "GET", path: "/v1/job/hello-gpu", wantCode: 200, want: `"Type": "batch"`},
		{name: "get job missing", method: "GET", path: "/v1/job/nope", wantCode: 404, want: `"error": "job \"nope\": not found"`},
		{name: "deregister", method: "DELETE", path: "/v1/job/hello-gpu", wantCode: 200, want: `"EvalID": "stop-hello-gpu"`},
		{name: "deregister bad purge", method: "DELETE", path: "/v1/job/hello-gpu?purge=maybe", wantCode: 400, want: "purge"},
		{name: "deregister missing", method: "DELETE", path: "/v1/job/nope", wantCode: 404},
		{name: "job allocs", method: "GET", path: "/v1/job/hello-gpu/allocations", wantCode: 200, want: `"ID": "a1b2c3d4-0000"`},
		{name: "job allocs none", method: "GET", path: "/v1/job/other/allocations", wantCode: 200, want: "[]"},
		{name: "job evals", method: "GET", path: "/v1/job/hello-gpu/evaluations", wantCode: 200, want: `"ID": "e1"`},
		{name: "job evals error", method: "GET", path: "/v1/job/hello-gpu/evaluations", errs: map[string]error{"JobEvaluations": structs.ErrNoLeader}, wantCode: 503},
		{name: "allocs", method: "GET", path: "/v1/allocations?prefix=a1b2", wantCode: 200, want: `"ID": "a1b2c3d4-0000"`},
		{name: "alloc", method: "GET", path: "/v1/allocation/a1b2c3d4-0000", wantCode: 200, want: `"NodeID": "node-1"`},
		{name: "alloc missing", method: "GET", path: "/v1/allocation/x", wantCode: 404},
		{name: "eval", method: "GET", path: "/v1/evaluation/e1", wantCode: 200, want: `"Status": "complete"`},
		{name: "eval missing", method: "GET", path: "/v1/evaluation/x", wantCode: 404},
		{name: "nodes", method: "GET", path: "/v1/nodes", wantCode: 200, want: `"Name": "laptop"`},
		{name: "node", method: "GET", path: "/v1/node/node-1", wantCode: 200, want: `"ID": "node-1"`},
		{name: "node missing", method: "GET", path: "/v1/node/x", wantCode: 404},
		{name: "leader", method: "GET", path: "/v1/status/leader", wantCode: 200, want: `"127.0.0.1:4657"`},
		{name: "peers", method: "GET", path: "/v1/status/peers", wantCode: 200, want: `"127.0.0.1:4657"`},
		{name: "health", method: "GET", path: "/v1/status/health", wantCode: 200, want: `"ok": true`},
		{name: "self", method: "GET", path: "/v1/agent/self", wantCode: 200, want: `"state": "Leader"`},
		{name: "bad index", method: "GET", path: "/v1/jobs?index=abc", wantCode: 400, want: "index parameter"},
		{name: "bad wait", method: "GET", path: "/v1/jobs?wait=soon", wantCode: 400, want: "wait parameter"},
		{name: "negative wait", method: "GET", path: "/v1/nodes?wait=-5s", wantCode: 400, want: "wait parameter"},
		{name: "bad stale", method: "GET", path: "/v1/allocations?stale=perhaps", wantCode: 400, want: "stale parameter"},
		{name: "unknown route", method: "GET", path: "/v1/nope", wantCode: 404, want: "no route for GET /v1/nope"},
		{name: "wrong method", method: "POST", path: "/v1/job/hello-gpu", body: "{}", wantCode: 405, want: "method POST not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs, _, ts := fixture(t)
			for k, v := range tc.errs {
				fs.errs[k] = v
			}
			if tc.name == "deregister missing" {
				delete(fs.jobs, "nope")
			}
			resp, body := doReq(t, tc.method, ts.URL+tc.path, tc.body)
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tc.wantCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if !strings.Contains(body, tc.want) {
				t.Errorf("body %s does not contain %q", body, tc.want)
			}
			if tc.wantCode >= 400 {
				var eb errorResponse
				if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Error == "" {
					t.Errorf("error body %s is not {\"error\": ...}: %v", body, err)
				}
			}
		})
	}
}

func TestRegisterConvertsJob(t *testing.T) {
	fs, _, ts := fixture(t)
	resp, body := doReq(t, "PUT", ts.URL+"/v1/jobs", jobBody)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get(headerIndex); got != "7" {
		t.Errorf("%s = %q, want 7", headerIndex, got)
	}
	j := fs.lastJob
	if j == nil || j.ID != "hello-gpu" || len(j.TaskGroups) != 1 {
		t.Fatalf("server got job %+v", j)
	}
	dev := j.TaskGroups[0].Tasks[0].Resources.Devices
	if len(dev) != 1 || dev[0].Name != "nvidia/gpu" || dev[0].Count != 1 {
		t.Errorf("devices = %+v, want one nvidia/gpu", dev)
	}
}

func TestDeregisterPurge(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  bool
	}{{"", false}, {"?purge=true", true}, {"?purge", true}, {"?purge=false", false}} {
		t.Run(tc.query, func(t *testing.T) {
			fs, _, ts := fixture(t)
			resp, body := doReq(t, "DELETE", ts.URL+"/v1/job/hello-gpu"+tc.query, "")
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if fs.lastPurge != tc.want {
				t.Errorf("purge = %v, want %v", fs.lastPurge, tc.want)
			}
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	_, _, ts := fixture(t)
	big := `{"Job":{"ID":"` + strings.Repeat("x", 5000) + `"}}`
	for _, path := range []string{"/v1/jobs", "/v1/jobs/parse"} {
		t.Run(path, func(t *testing.T) {
			resp, body := doReq(t, "POST", ts.URL+path, big)
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("status = %d, want 413; body %s", resp.StatusCode, body)
			}
			if !strings.Contains(body, "larger than 4096 bytes") {
				t.Errorf("body %s does not name the limit", body)
			}
		})
	}
}

func TestBlockingQuery(t *testing.T) {
	fs, _, ts := fixture(t)
	fs.meta = structs.QueryMeta{Index: 1234, KnownLeader: true, LastContact: 1500 * time.Millisecond}
	cases := []struct {
		query    string
		wantIdx  uint64
		wantWait time.Duration
		wantPref string
		wantStal bool
	}{
		{"?index=17&wait=30s", 17, 30 * time.Second, "", false},
		{"?index=5&wait=10", 5, 10 * time.Second, "", false},
		{"?prefix=hel&stale", 0, 0, "hel", true},
		{"", 0, 0, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			// /v1/allocations makes one server call (/v1/jobs also reads
			// the allocations for its summaries).
			resp, body := doReq(t, "GET", ts.URL+"/v1/allocations"+tc.query, "")
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			q := fs.lastQuery
			if q.MinQueryIndex != tc.wantIdx || q.MaxQueryTime != tc.wantWait || q.Prefix != tc.wantPref || q.AllowStale != tc.wantStal {
				t.Errorf("query options = %+v", q)
			}
			for h, want := range map[string]string{headerIndex: "1234", headerKnownLeader: "true", headerLastContact: "1500"} {
				if got := resp.Header.Get(h); got != want {
					t.Errorf("%s = %q, want %q", h, got, want)
				}
			}
		})
	}
}

func TestHealthNoLeader(t *testing.T) {
	fs, _, ts := fixture(t)
	fs.leader = ""
	resp, body := doReq(t, "GET", ts.URL+"/v1/status/health", "")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status = %d, want 503", resp.StatusCode)
	}
	if !strings.Contains(body, `"ok": false`) || !strings.Contains(body, "no cluster leader") {
		t.Errorf("body = %s", body)
	}
}

func TestMethodNotAllowedAllowHeader(t *testing.T) {
	_, _, ts := fixture(t)
	resp, _ := doReq(t, "PATCH", ts.URL+"/v1/jobs", "")
	if resp.StatusCode != 405 {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	allow := resp.Header.Get("Allow")
	for _, m := range []string{"GET", "PUT", "POST"} {
		if !strings.Contains(allow, m) {
			t.Errorf("Allow %q lacks %s", allow, m)
		}
	}
}

func TestNodeSecretNotServed(t *testing.T) {
	_, _, ts := fixture(t)
	// The route must serve the node (a 200 with its ID), not an error
	// whose body happens to lack the secret.
	resp, body := doReq(t, "GET", ts.URL+"/v1/node/node-1", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ID": "node-1"`) {
		t.Fatalf("GET /v1/node/node-1: status %d, want 200 with the node: %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "s3cret") {
		t.Fatalf("node secret leaked: %s", body)
	}
}

func TestNewConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without Server succeeded")
	}
	if _, err := New(Config{Server: newFakeServer(), MaxBodyBytes: -1}); err == nil {
		t.Error("New with negative MaxBodyBytes succeeded")
	}
}

// TestLogsFramed: without plain=true the log is Nomad's stream of JSON
// frames, Data base64 in JSON, Offset the bytes so far.
func TestLogsFramed(t *testing.T) {
	_, _, ts := fixture(t)
	resp, body := doReq(t, "GET", ts.URL+"/v1/client/fs/logs/a1b2c3d4-0000?task=main&type=stdout&origin=start&offset=0", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var f logFrame
	if err := json.Unmarshal([]byte(body), &f); err != nil {
		t.Fatalf("frame %q: %v", body, err)
	}
	if string(f.Data) != "hello\n" || f.Offset != 6 || f.File != "main.stdout" {
		t.Errorf("frame %+v", f)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
}

func TestLogs(t *testing.T) {
	cases := []struct {
		name     string
		query    string
		wantCode int
		want     string
	}{
		{"stdout", "?task=main&type=stdout&plain=true", 200, "hello\n"},
		{"stderr", "?task=main&type=stderr&plain=true", 200, "oops\n"},
		{"default type and only task", "?plain=true", 200, "hello\n"},
		{"bad type", "?task=main&type=stdin&plain=true", 400, "type parameter"},
		{"bad follow", "?task=main&follow=often&plain=true", 400, "follow parameter"},
		{"unknown task", "?task=other&plain=true", 404, "not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, ts := fixture(t)
			resp, body := doReq(t, "GET", ts.URL+"/v1/client/fs/logs/a1b2c3d4-0000"+tc.query, "")
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status = %d, want %d: %s", resp.StatusCode, tc.wantCode, body)
			}
			if tc.wantCode == 200 {
				if body != tc.want {
					t.Errorf("body = %q, want %q", body, tc.want)
				}
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
					t.Errorf("Content-Type = %q", ct)
				}
			} else if !strings.Contains(body, tc.want) {
				t.Errorf("body %s lacks %q", body, tc.want)
			}
		})
	}
	t.Run("unknown alloc", func(t *testing.T) {
		_, _, ts := fixture(t)
		resp, _ := doReq(t, "GET", ts.URL+"/v1/client/fs/logs/zzz?task=main&plain=true", "")
		if resp.StatusCode != 404 {
			t.Fatalf("status = %d, want 404", resp.StatusCode)
		}
	})
}

// TestLogsFollow writes to the followed log in steps and checks each line
// arrives before the next is written: the handler flushes per chunk.
func TestLogsFollow(t *testing.T) {
	_, fc, ts := fixture(t)
	pr, pw := io.Pipe()
	fc.follow = pr
	resp, err := http.Get(ts.URL + "/v1/client/fs/logs/a1b2c3d4-0000?task=main&follow=true&plain=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 3; i++ {
		line := fmt.Sprintf("line %d\n", i)
		if _, err := pw.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() {
			s, _ := br.ReadString('\n')
			got <- s
		}()
		select {
		case s := <-got:
			if s != line {
				t.Fatalf("read %q, want %q", s, line)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("line %d not flushed within 5s", i)
		}
	}
	// The task finishing ends the stream.
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil || len(rest) != 0 {
		t.Fatalf("after close read %q, %v", rest, err)
	}
}

// TestLogsFollowEndsOnShutdown checks that a followed log, which never
// ends by itself, does not hold up a graceful shutdown of the agent's HTTP
// server: the stream is closed as soon as the shutdown begins.
func TestLogsFollowEndsOnShutdown(t *testing.T) {
	_, fc, ts := fixture(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	fc.follow = pr
	resp, err := http.Get(ts.URL + "/v1/client/fs/logs/a1b2c3d4-0000?task=main&follow=true&plain=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	body := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		body <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := ts.Config.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a followed log open: %v", err)
	}
	select {
	case <-body:
	case <-time.After(5 * time.Second):
		t.Fatal("followed log still open after shutdown")
	}
}

// TestLogsProxy checks that logs of an allocation on another node are
// fetched from that node's agent.
func TestLogsProxy(t *testing.T) {
	// The remote agent: its client holds the allocation's node.
	remoteFS := newFakeServer()
	remoteFS.allocs["a2"] = &structs.Allocation{ID: "a2", NodeID: "node-2"}
	remoteClient := &fakeClient{node: &structs.Node{ID: "node-2"}, logs: map[string]string{"a2/main/stdout": "remote hello\n"}}
	rh, err := New(Config{Server: remoteFS, Client: remoteClient})
	if err != nil {
		t.Fatal(err)
	}
	remote := httptest.NewServer(rh)
	defer remote.Close()

	fs, _, ts := fixture(t)
	fs.allocs["a2"] = &structs.Allocation{ID: "a2", NodeID: "node-2"}
	fs.nodes["node-2"] = &structs.Node{ID: "node-2", HTTPAddr: strings.TrimPrefix(remote.URL, "http://")}
	resp, body := doReq(t, "GET", ts.URL+"/v1/client/fs/logs/a2?task=main&plain=true", "")
	if resp.StatusCode != 200 || body != "remote hello\n" {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
	resp, body = doReq(t, "GET", ts.URL+"/v1/client/fs/logs/a2?task=nope&plain=true", "")
	if resp.StatusCode != 404 || !strings.Contains(body, "not found") {
		t.Fatalf("status %d body %q, want the remote 404", resp.StatusCode, body)
	}
	// A forwarded request for an allocation not on this node is refused,
	// never forwarded again.
	req, _ := http.NewRequest("GET", remote.URL+"/v1/client/fs/logs/a2?task=main&plain=true", nil)
	remoteClient.node = &structs.Node{ID: "node-3"}
	req.Header.Set(headerForwarded, "1")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 404 {
		t.Fatalf("forwarded request status = %d, want 404", r2.StatusCode)
	}
}
