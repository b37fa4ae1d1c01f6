package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestNewClientAddress(t *testing.T) {
	cases := []struct {
		name, addr, env, want string
		wantErr               bool
	}{
		{name: "default", want: DefaultAddress},
		{name: "env", env: "http://10.0.0.1:4656", want: "http://10.0.0.1:4656"},
		{name: "explicit wins", addr: "https://gpu.example:443", env: "http://x:1", want: "https://gpu.example:443"},
		{name: "bare host port", addr: "127.0.0.1:9999", want: "http://127.0.0.1:9999"},
		{name: "bad scheme", addr: "ftp://x", wantErr: true},
		{name: "no host", addr: "http://", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GPULAYER_ADDR", tc.env)
			c, err := NewClient(&Config{Address: tc.addr})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("NewClient(%q) succeeded", tc.addr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Address() != tc.want {
				t.Errorf("address = %q, want %q", c.Address(), tc.want)
			}
		})
	}
}

func newTestClient(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	c, err := NewClient(&Config{Address: ts.URL, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestQueryOptionsAndMeta(t *testing.T) {
	var got *http.Request
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set(HeaderIndex, "77")
		w.Header().Set(HeaderKnownLeader, "true")
		w.Header().Set(HeaderLastContact, "250")
		_, _ = io.WriteString(w, `[{"ID":"j1","TaskGroups":[{"Name":"g"}]}]`)
	})
	jobs, qm, err := c.Jobs().List(&QueryOptions{WaitIndex: 5, WaitTime: 30 * time.Second, Prefix: "j", AllowStale: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != "j1" {
		t.Fatalf("jobs = %+v", jobs)
	}
	q := got.URL.Query()
	if q.Get("index") != "5" || q.Get("wait") != "30s" || q.Get("prefix") != "j" || q.Get("stale") != "true" {
		t.Errorf("query = %v", q)
	}
	if got.Header.Get(HeaderToken) != "tok" {
		t.Errorf("token header = %q", got.Header.Get(HeaderToken))
	}
	if qm.LastIndex != 77 || !qm.KnownLeader || qm.LastContact != 250*time.Millisecond {
		t.Errorf("meta = %+v", qm)
	}
}

func TestStatusError(t *testing.T) {
	cases := []struct {
		name, body string
		code       int
		want       string
	}{
		{"json", `{"error":"job \"x\": not found"}`, 404, `job "x": not found`},
		{"text", "upstream broke", 502, "upstream broke"},
		{"empty", "", 503, "Service Unavailable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.code)
				_, _ = io.WriteString(w, tc.body)
			})
			_, _, err := c.Jobs().Info("x", nil)
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *StatusError", err)
			}
			if se.Code != tc.code || se.Message != tc.want {
				t.Errorf("got %d %q, want %d %q", se.Code, se.Message, tc.code, tc.want)
			}
			if IsNotFound(err) != (tc.code == 404) {
				t.Errorf("IsNotFound = %v", IsNotFound(err))
			}
		})
	}
}

func TestWrites(t *testing.T) {
	var method, path, rawQuery string
	var body map[string]json.RawMessage
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		method, path, rawQuery = r.Method, r.URL.EscapedPath(), r.URL.RawQuery
		body = nil
		_ = json.NewDecoder(r.Body).Decode(&body)
		switch r.Method {
		case http.MethodPut:
			_, _ = io.WriteString(w, `{"EvalID":"e1","EvalCreateIndex":3,"JobModifyIndex":3,"Warnings":"","Index":3}`)
		case http.MethodDelete:
			_, _ = io.WriteString(w, `{"EvalID":"e2","JobModifyIndex":4,"Index":4}`)
		default:
			_, _ = io.WriteString(w, `{"ID":"parsed","Type":"batch"}`)
		}
	})
	resp, wm, err := c.Jobs().Register(&Job{ID: "j"}, nil)
	if err != nil || resp.EvalID != "e1" || wm.LastIndex != 3 || method != "PUT" || path != "/v1/jobs" {
		t.Fatalf("register: %+v %+v %v %s %s", resp, wm, err, method, path)
	}
	if _, ok := body["Job"]; !ok {
		t.Errorf("register body %v lacks Job", body)
	}
	evalID, wm, err := c.Jobs().Deregister("j/x", true, nil)
	if err != nil || evalID != "e2" || wm.LastIndex != 4 || method != "DELETE" || path != "/v1/job/j%2Fx" || rawQuery != "purge=true" {
		t.Fatalf("deregister: %q %+v %v %s %s %s", evalID, wm, err, method, path, rawQuery)
	}
	job, err := c.Jobs().ParseWithVars(`job "parsed" {}`, map[string]string{"a": "b"})
	if err != nil || job.ID != "parsed" || path != "/v1/jobs/parse" {
		t.Fatalf("parse: %+v %v %s", job, err, path)
	}
	if string(body["JobHCL"]) != `"job \"parsed\" {}"` {
		t.Errorf("parse body = %s", body["JobHCL"])
	}
}

func TestLogsStream(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/v1/client/fs/logs/a1" || q.Get("task") != "main" || q.Get("type") != "stderr" || q.Get("follow") != "true" || q.Get("plain") != "true" {
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":"bad request `+r.URL.String()+`"}`)
			return
		}
		_, _ = io.WriteString(w, "line 1\nline 2\n")
	})
	rc, err := c.AllocFS().Logs(context.Background(), "a1", "main", LogTypeStderr, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || string(b) != "line 1\nline 2\n" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := c.AllocFS().Logs(context.Background(), "a1", "main", LogTypeStdout, false); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("err = %v, want a 400 StatusError", err)
	}
}

func TestStatusAndAgent(t *testing.T) {
	leader := "127.0.0.1:4657"
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/status/leader":
			_ = json.NewEncoder(w).Encode(leader)
		case "/v1/status/peers":
			_ = json.NewEncoder(w).Encode([]string{leader})
		case "/v1/status/health":
			w.WriteHeader(503)
			_, _ = io.WriteString(w, `{"ok":false,"error":"no cluster leader"}`)
		case "/v1/agent/self":
			_, _ = io.WriteString(w, `{"stats":{"server":{"state":"Leader"}}}`)
		default:
			w.WriteHeader(404)
		}
	})
	if l, err := c.Status().Leader(); err != nil || l != leader {
		t.Errorf("leader = %q, %v", l, err)
	}
	if p, err := c.Status().Peers(); err != nil || len(p) != 1 {
		t.Errorf("peers = %v, %v", p, err)
	}
	var se *StatusError
	if _, err := c.Agent().Health(); !errors.As(err, &se) || se.Code != 503 || se.Message != "no cluster leader" {
		t.Errorf("health err = %v", err)
	}
	if self, err := c.Agent().Self(); err != nil || self["stats"] == nil {
		t.Errorf("self = %v, %v", self, err)
	}
}
