package http

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// TestJobValidate: PUT /v1/validate/job answers 200 with no problems for a
// valid job and each problem, naming its field, for an invalid one (an
// endpoint group of count 1 on port 0); nothing is registered either way.
func TestJobValidate(t *testing.T) {
	fs, _, ts := fixture(t)
	valid := `{"Job":{"ID":"serve","Type":"service","TaskGroups":[{"Name":"llm","Count":3,` +
		`"Networks":[{"DynamicPorts":[{"Label":"http"}]}],"Endpoint":{"Name":"llm-70b","Port":9000,"Model":"m"},` +
		`"Tasks":[{"Name":"main","Driver":"native","Config":{"command":"/bin/true"}}]}]}}`
	bad := strings.Replace(strings.Replace(valid, `"Count":3`, `"Count":1`, 1), `"Port":9000`, `"Port":0`, 1)
	cases := []struct {
		name, body string
		want       []string
	}{
		{"valid", valid, nil},
		{"invalid endpoint", bad, []string{
			`group "llm": endpoint: count: a group with an endpoint needs count 2-16, got 1`,
			`group "llm": endpoint: port: must be 1-65535, got 0`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := doReq(t, "PUT", ts.URL+"/v1/validate/job", tc.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			var out api.JobValidateResponse
			if err := json.Unmarshal([]byte(body), &out); err != nil {
				t.Fatal(err)
			}
			if !out.DriverConfigValidated || len(out.ValidationErrors) != len(tc.want) || (tc.want == nil) != (out.Error == "") {
				t.Fatalf("answer %+v, want problems %q", out, tc.want)
			}
			for i, w := range tc.want {
				if out.ValidationErrors[i] != w {
					t.Errorf("problem %d = %q, want %q", i, out.ValidationErrors[i], w)
				}
			}
			if fs.lastJob != nil {
				t.Fatalf("validate registered %+v", fs.lastJob)
			}
		})
	}
	if resp, body := doReq(t, "PUT", ts.URL+"/v1/validate/job", `{"Job":`); resp.StatusCode != 400 {
		t.Fatalf("bad body: %d %s", resp.StatusCode, body)
	}
}
