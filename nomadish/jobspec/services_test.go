package jobspec

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

const servicesJob = `job "web" {
  group "api" {
    count = 3
    network {
      port "http" {
        to = 8000
      }
      port "admin" {
        static = 9090
      }
    }
    service {
      name     = "api"
      port     = "http"
      tags     = ["v1", "gpu"]
      provider = "nomad"
      check {
        type     = "http"
        path     = "/health"
        interval = "200ms"
        timeout  = "1s"
      }
    }
    task "server" {
      driver = "native"
      config {
        command = "/bin/sleep"
        args    = ["100"]
      }
      service {
        name = "api-admin"
        port = "admin"
        check {
          type     = "script"
          command  = "/bin/true"
          interval = "1s"
          timeout  = "500ms"
        }
      }
    }
  }
}
`

func TestParseServicesAndPorts(t *testing.T) {
	job, err := Parse("web.hcl", []byte(servicesJob), nil)
	if err != nil {
		t.Fatal(err)
	}
	tg := job.TaskGroups[0]
	if len(tg.Networks) != 1 {
		t.Fatalf("networks %+v", tg.Networks)
	}
	nw := tg.Networks[0]
	if len(nw.DynamicPorts) != 1 || nw.DynamicPorts[0].Label != "http" || nw.DynamicPorts[0].To != 8000 {
		t.Fatalf("dynamic %+v", nw.DynamicPorts)
	}
	if len(nw.ReservedPorts) != 1 || nw.ReservedPorts[0].Value != 9090 {
		t.Fatalf("reserved %+v", nw.ReservedPorts)
	}
	s := tg.Services[0]
	if s.Name != "api" || s.PortLabel != "http" || s.Provider != "nomad" || len(s.Tags) != 2 || len(s.Checks) != 1 {
		t.Fatalf("service %+v", s)
	}
	if c := s.Checks[0]; c.Type != "http" || c.Path != "/health" || c.Interval != 200*time.Millisecond || c.Timeout != time.Second {
		t.Fatalf("check %+v", c)
	}
	ts := tg.Tasks[0].Services
	if len(ts) != 1 || ts[0].Checks[0].Type != "script" || ts[0].Checks[0].Command != "/bin/true" {
		t.Fatalf("task services %+v", ts)
	}
}

// TestParseServicesBadInput: each mistake is one clear error naming the
// block and its line.
func TestParseServicesBadInput(t *testing.T) {
	cases := []struct {
		name, from, to string
		line           int
		want           []string
	}{
		{"unknown check type", `type     = "http"`, `type     = "grpc"`, 18,
			[]string{"Unknown check type", `service "api"`, `"grpc"`, "http, tcp or script"}},
		{"negative interval", `interval = "200ms"`, `interval = "-5s"`, 20,
			[]string{"Invalid check interval", `service "api"`, "must not be negative", "-5s"}},
		{"negative timeout", `timeout  = "500ms"`, `timeout  = "-1s"`, 37,
			[]string{"Invalid check timeout", `service "api-admin"`, "must not be negative"}},
		{"port label used twice", `port "admin" {`, `port "http" {`, 8,
			[]string{"Duplicate port label", `port "http"`, "already defined at line 5"}},
		{"missing interval", `interval = "1s"`, ``, 33, []string{"Missing check interval", `service "api-admin"`}},
		{"consul provider", `provider = "nomad"`, `provider = "consul"`, 16,
			[]string{"Unsupported service provider", `"consul"`}},
		{"unknown check attribute", `path     = "/health"`, "path     = \"/health\"\n        method   = \"POST\"", 20,
			[]string{"Unsupported argument", `"method"`}},
		{"bad network mode", `network {`, "network {\n      mode = \"bridge\"", 5, []string{"Unsupported network mode", `"bridge"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(servicesJob, tc.from, tc.to, 1)
			_, err := Parse("web.hcl", []byte(src), nil)
			if err == nil {
				t.Fatal("parsed")
			}
			msg := err.Error()
			if n := strings.Count(msg, "\n") + 1; n != 1 {
				t.Fatalf("want one error, got %d:\n%s", n, msg)
			}
			if !strings.HasPrefix(msg, "web.hcl:"+strconv.Itoa(tc.line)+":") {
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
