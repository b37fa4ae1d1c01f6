package jobspec

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	job, err := ParseFile("testdata/endpoint.hcl", nil)
	if err != nil {
		t.Fatal(err)
	}
	e := job.TaskGroups[0].Endpoint
	if e == nil || e.Name != "llm-70b" || e.Port != 9000 || e.Model != "llama-3-70b" || e.Revision != "r7" ||
		e.Policy != "least_outstanding" || e.ModelsPath != "/openai/v1/models" || e.MemberPort != "http" {
		t.Fatalf("endpoint %+v", e)
	}
	plain, err := Parse("web.hcl", []byte(servicesJob), nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.TaskGroups[0].Endpoint != nil {
		t.Fatal("a group without an endpoint block has an endpoint")
	}
}

// TestParseEndpointBadInput: each mistake in an endpoint block is one
// clear error at its line.
func TestParseEndpointBadInput(t *testing.T) {
	src, err := os.ReadFile("testdata/endpoint.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, from, to string
		line           int
		want           []string
	}{
		{"uppercase name", `name        = "llm-70b"`, `name        = "LLM"`, 10, []string{"Invalid endpoint name", `"LLM"`, "lowercase"}},
		{"name with underscore", `name        = "llm-70b"`, `name        = "llm_70b"`, 10, []string{"Invalid endpoint name"}},
		{"port zero", `port        = 9000`, `port        = 0`, 11, []string{"Invalid port", "1-65535", "got 0"}},
		{"port too big", `port        = 9000`, `port        = 70000`, 11, []string{"Invalid port", "got 70000"}},
		{"port a string", `port        = 9000`, `port        = "x"`, 11, []string{"port"}},
		{"port fractional", `port        = 9000`, `port        = 90.5`, 11, []string{"whole number"}},
		{"unknown policy", `policy      = "least_outstanding"`, `policy      = "random"`, 14, []string{"Invalid endpoint policy", `"random"`, "round_robin, least_outstanding"}},
		{"relative models path", `models_path = "/openai/v1/models"`, `models_path = "v1/models"`, 15, []string{"Invalid models_path", `must start with "/"`}},
		{"missing model", `model       = "llama-3-70b"`, ``, 9, []string{"Missing required argument", `"model"`}},
		{"missing name", `name        = "llm-70b"`, ``, 9, []string{"Missing required argument", `"name"`}},
		{"missing port", `port        = 9000`, ``, 9, []string{"Missing required argument", `"port"`}},
		{"unknown attribute", `revision    = "r7"`, `replicas    = 3`, 13, []string{"Unsupported argument", `"replicas"`}},
		{"second endpoint block", "    task \"server\" {", "    endpoint {\n      name = \"b\"\n      port = 9001\n      model = \"m\"\n    }\n    task \"server\" {", 18, []string{"endpoint"}},
		{"endpoint in a task", "      driver = \"native\"", "      driver = \"native\"\n      endpoint {}", 20, []string{"Unsupported block type", `"endpoint"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := strings.Replace(string(src), tc.from, tc.to, 1)
			if s == string(src) {
				t.Fatalf("%q not in the fixture", tc.from)
			}
			_, err := Parse("ep.hcl", []byte(s), nil)
			if err == nil {
				t.Fatal("parsed")
			}
			msg := err.Error()
			if n := strings.Count(msg, "\n") + 1; n != 1 {
				t.Fatalf("want one error, got %d:\n%s", n, msg)
			}
			if !strings.HasPrefix(msg, "ep.hcl:"+strconv.Itoa(tc.line)+":") {
				t.Fatalf("error not at line %d: %s", tc.line, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}
