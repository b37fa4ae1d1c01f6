package http

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/server/servertest"
)

// nomadDispatchResponse and nomadPeriodicForceResponse are the fields of
// Nomad's api.JobDispatchResponse and of the answer its Jobs().PeriodicForce
// decodes, which its client reads from our routes.
type nomadDispatchResponse struct {
	DispatchedJobID string
	EvalID          string
	EvalCreateIndex uint64
	JobCreateIndex  uint64
}

type nomadPeriodicForceResponse struct {
	EvalID string
}

func childrenServer(t *testing.T) *httptest.Server {
	t.Helper()
	h, err := New(Config{Server: servertest.NewServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// childrenJobBody is a batch job in the JSON Nomad's Go client sends, with
// extra job-level fields spliced in.
func childrenJobBody(id, extra string) string {
	return fmt.Sprintf(`{"Job":{"ID":%q,"Name":%q,"Type":"batch",%s"TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t","Driver":"native","Config":{"command":"/bin/true"},"Resources":{"CPU":100,"MemoryMB":64},"DispatchPayload":{"File":"in/payload.txt"}}]}]}}`, id, id, extra)
}

// TestDispatchAndPeriodicForce_NomadShapes: the bodies and answers of
// Nomad's Jobs().Dispatch (Payload base64, Meta, idempotency token as
// ?idempotency_token=) and Jobs().PeriodicForce (PUT, no body) round-trip
// against a real server; children are listed with ?prefix=<job>/ and read
// by their escaped ID.
func TestDispatchAndPeriodicForce_NomadShapes(t *testing.T) {
	ts := childrenServer(t)
	param := `"ParameterizedJob":{"Payload":"required","MetaRequired":["input"]},"MaxRunningChildren":2,`
	if resp, body := doReq(t, "PUT", ts.URL+"/v1/jobs", childrenJobBody("render", param)); resp.StatusCode != 200 {
		t.Fatalf("register parameterized: %d %s", resp.StatusCode, body)
	}
	periodic := `"Periodic":{"Enabled":true,"Spec":"*/5 * * * *","SpecType":"cron","ProhibitOverlap":true,"TimeZone":"Europe/Berlin"},`
	if resp, body := doReq(t, "PUT", ts.URL+"/v1/jobs", childrenJobBody("nightly", periodic)); resp.StatusCode != 200 || strings.Contains(body, `"EvalID":"`+"x") {
		t.Fatalf("register periodic: %d %s", resp.StatusCode, body)
	}
	req := fmt.Sprintf(`{"JobID":"render","Payload":%q,"Meta":{"input":"s3://bucket/a"}}`, base64.StdEncoding.EncodeToString([]byte("hello")))
	resp, body := doReq(t, "PUT", ts.URL+"/v1/job/render/dispatch?idempotency_token=abc", req)
	var d nomadDispatchResponse
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &d) != nil || !strings.HasPrefix(d.DispatchedJobID, "render/dispatch-") ||
		d.EvalID == "" || d.JobCreateIndex == 0 || d.EvalCreateIndex == 0 {
		t.Fatalf("dispatch: %d %s", resp.StatusCode, body)
	}
	resp, body = doReq(t, "PUT", ts.URL+"/v1/job/render/dispatch?idempotency_token=abc", req)
	var again nomadDispatchResponse
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &again) != nil || again.DispatchedJobID != d.DispatchedJobID {
		t.Fatalf("repeat with the token: %d %s, want %q", resp.StatusCode, body, d.DispatchedJobID)
	}
	resp, body = doReq(t, "GET", ts.URL+"/v1/job/"+url.PathEscape(d.DispatchedJobID), "")
	var child struct {
		ID, ParentID string
		Dispatched   bool
		Payload      []byte
		Meta         map[string]string
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &child) != nil || child.ParentID != "render" || !child.Dispatched ||
		string(child.Payload) != "hello" || child.Meta["input"] != "s3://bucket/a" {
		t.Fatalf("child: %d %s", resp.StatusCode, body)
	}
	resp, body = doReq(t, "GET", ts.URL+"/v1/jobs?prefix="+url.QueryEscape("render/"), "")
	if resp.StatusCode != 200 || countParent(t, body, "render") != 1 {
		t.Fatalf("children by prefix: %d %s", resp.StatusCode, body)
	}

	resp, body = doReq(t, "PUT", ts.URL+"/v1/job/nightly/periodic/force", "")
	var f nomadPeriodicForceResponse
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &f) != nil || f.EvalID == "" {
		t.Fatalf("periodic force: %d %s", resp.StatusCode, body)
	}
	resp, body = doReq(t, "GET", ts.URL+"/v1/jobs?prefix="+url.QueryEscape("nightly/periodic-"), "")
	if resp.StatusCode != 200 || countParent(t, body, "nightly") != 1 {
		t.Fatalf("forced child: %d %s", resp.StatusCode, body)
	}
}

// countParent counts the jobs of a /v1/jobs answer whose ParentID is parent.
func countParent(t *testing.T, body, parent string) int {
	t.Helper()
	var jobs []struct{ ParentID string }
	if err := json.Unmarshal([]byte(body), &jobs); err != nil {
		t.Fatalf("decode jobs: %v", err)
	}
	n := 0
	for _, j := range jobs {
		if j.ParentID == parent {
			n++
		}
	}
	return n
}

// TestDispatchAndPeriodic_BadInput400: each mistake is a 400 whose message
// names the field.
func TestDispatchAndPeriodic_BadInput400(t *testing.T) {
	ts := childrenServer(t)
	param := `"ParameterizedJob":{"Payload":"optional","MetaRequired":["input"]},`
	for _, b := range []string{childrenJobBody("render", param), childrenJobBody("plain", "")} {
		if resp, body := doReq(t, "PUT", ts.URL+"/v1/jobs", b); resp.StatusCode != 200 {
			t.Fatalf("register: %d %s", resp.StatusCode, body)
		}
	}
	big := base64.StdEncoding.EncodeToString(make([]byte, 16*1024+1))
	cases := []struct{ name, method, path, body, want string }{
		{"dispatch of a job that is not parameterized", "PUT", "/v1/job/plain/dispatch", `{}`, `is not a parameterized job`},
		{"missing required meta", "PUT", "/v1/job/render/dispatch", `{"Meta":{"other":"1"}}`, `Meta: missing required key \"input\"`},
		{"payload over 16 KiB", "PUT", "/v1/job/render/dispatch", `{"Meta":{"input":"a"},"Payload":"` + big + `"}`, `Payload: at most 16384 bytes, got 16385`},
		{"id prefix template", "PUT", "/v1/job/render/dispatch", `{"Meta":{"input":"a"},"IdPrefixTemplate":"x"}`, `IdPrefixTemplate`},
		{"body JobID differs", "PUT", "/v1/job/render/dispatch", `{"JobID":"other"}`, `JobID`},
		{"invalid cron", "PUT", "/v1/jobs", childrenJobBody("c", `"Periodic":{"Enabled":true,"Spec":"61 * * * *","SpecType":"cron"},`), `periodic: cron: \"61 * * * *\" is not a cron expression`},
		{"cron and crons", "PUT", "/v1/jobs", childrenJobBody("c", `"Periodic":{"Spec":"* * * * *","Specs":["* * * * *"]},`), `periodic: cron and crons`},
		{"unknown time zone", "PUT", "/v1/jobs", childrenJobBody("c", `"Periodic":{"Specs":["* * * * *"],"TimeZone":"Mars/Olympus"},`), `periodic: time_zone: unknown time zone`},
		{"periodic service job", "PUT", "/v1/jobs", strings.Replace(childrenJobBody("c", `"Periodic":{"Specs":["* * * * *"]},`), `"batch"`, `"service"`, 1), `type: a periodic job must be \"batch\"`},
		{"limit without children", "PUT", "/v1/jobs", childrenJobBody("c", `"MaxRunningChildren":3,`), `max_running_children: only a periodic or parameterized job`},
		{"forged child", "PUT", "/v1/jobs", childrenJobBody("c", `"ParentID":"render",`), `ParentID: is set by the server`},
		{"force of a job that is not periodic", "PUT", "/v1/job/plain/periodic/force", ``, `is not a periodic job`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := doReq(t, tc.method, ts.URL+tc.path, tc.body)
			if resp.StatusCode != 400 || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s = %d %s, want 400 containing %s", tc.method, tc.path, resp.StatusCode, body, tc.want)
			}
		})
	}
	if resp, body := doReq(t, "PUT", ts.URL+"/v1/job/nope/dispatch", `{}`); resp.StatusCode != 404 {
		t.Fatalf("dispatch of an unknown job: %d %s", resp.StatusCode, body)
	}
}
