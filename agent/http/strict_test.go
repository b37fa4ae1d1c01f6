package http

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestJobRegisterStrictFields (issue 12, "Must show 5"): a job with a
// field GPUlayer does not support, carrying a value, is refused with a
// 400 that names the field, and nothing is registered; a made-up field is
// accepted with a warning in Warnings; the zero values Nomad's client
// sends for blocks left out are accepted.
func TestJobRegisterStrictFields(t *testing.T) {
	base := `"ID":"s","Type":"batch","TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t","Driver":"native","Config":{"command":"/bin/true"}%s}]%s}]`
	cases := []struct {
		name, job string
		code      int
		want      string
	}{
		{"spreads", `{` + sprintf(base, "", "") + `,"Spreads":[{"Attribute":"${node.datacenter}","Weight":50}]}`, 400,
			"Job.Spreads: not supported by GPUlayer: spread blocks"},
		{"task lifecycle", `{` + sprintf(base, `,"Lifecycle":{"Hook":"prestart"}`, "") + `}`, 400, "Job.TaskGroups[0].Tasks[0].Lifecycle: not supported"},
		{"group network", `{` + sprintf(base, "", `,"Networks":[{"DynamicPorts":[{"Label":"http"}]}]`) + `}`, 400, "Job.TaskGroups[0].Networks: not supported"},
		{"task service", `{` + sprintf(base, `,"Services":[{"Name":"web"}]`, "") + `}`, 400, "Job.TaskGroups[0].Tasks[0].Services: not supported"},
		{"other region", `{` + sprintf(base, "", "") + `,"Region":"eu"}`, 400, `Job.Region \"eu\": not supported`},
		{"made-up field", `{` + sprintf(base, "", "") + `,"Frobnicate":true}`, 200, "Job.Frobnicate: unknown field, ignored"},
		{"zero Nomad blocks", `{` + sprintf(base, `,"Services":null,"Leader":false`, `,"Networks":null,"Update":null`) +
			`,"Periodic":null,"ParameterizedJob":null,"Dispatched":false,"Region":"global","NodePool":"default"}`, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs, _, ts := fixture(t)
			resp, body := doReq(t, "PUT", ts.URL+"/v1/jobs", `{"Job":`+tc.job+`}`)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, body)
			}
			if tc.code != http.StatusOK {
				if !strings.Contains(body, tc.want) {
					t.Errorf("body %s does not name %q", body, tc.want)
				}
				if fs.lastJob != nil {
					t.Errorf("a refused job was registered: %+v", fs.lastJob)
				}
				return
			}
			var out struct{ Warnings string }
			if err := json.Unmarshal([]byte(body), &out); err != nil {
				t.Fatal(err)
			}
			if out.Warnings != tc.want {
				t.Errorf("Warnings %q, want %q", out.Warnings, tc.want)
			}
		})
	}
	// The plan route checks the same way.
	h, err := New(Config{Server: &planningServer{fakeServer: newFakeServer()}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	resp, body := doReq(t, "PUT", ts.URL+"/v1/job/s/plan", `{"Job":{`+sprintf(base, "", "")+`,"Spreads":[{"Attribute":"x"}]}}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "Job.Spreads") {
		t.Errorf("plan of a job with spreads: %d %s", resp.StatusCode, body)
	}
}

func sprintf(format string, a ...interface{}) string { return fmt.Sprintf(format, a...) }
