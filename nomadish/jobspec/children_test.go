package jobspec

import (
	"strings"
	"testing"
)

const childrenHCL = `job "nightly" {
  type = "batch"
  max_running_children = 2
  periodic {
    crons            = ["0 3 * * *", "30 12 * * 1-5"]
    prohibit_overlap = true
    time_zone        = "Europe/Berlin"
  }
  group "g" {
    task "t" {
      driver = "native"
      config { command = "/bin/true" }
      dispatch_payload { file = "in/payload.json" }
    }
  }
}
`

// TestParsePeriodicParameterizedDispatchPayload: the blocks decode to
// Nomad's shapes, enabled defaulting to true and payload to "optional";
// the older singular cron is accepted.
func TestParsePeriodicParameterizedDispatchPayload(t *testing.T) {
	job, err := Parse("nightly.hcl", []byte(childrenHCL), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := job.Periodic
	if p == nil || len(p.Specs) != 2 || p.Specs[1] != "30 12 * * 1-5" || !p.ProhibitOverlap || p.TimeZone != "Europe/Berlin" ||
		p.Enabled == nil || !*p.Enabled || p.SpecType != "cron" {
		t.Fatalf("periodic %+v", p)
	}
	if job.MaxRunningChildren != 2 {
		t.Fatalf("max_running_children %d", job.MaxRunningChildren)
	}
	if dp := job.TaskGroups[0].Tasks[0].DispatchPayload; dp == nil || dp.File != "in/payload.json" {
		t.Fatalf("dispatch_payload %+v", dp)
	}
	src := strings.Replace(childrenHCL, `crons            = ["0 3 * * *", "30 12 * * 1-5"]`, `cron = "@daily"
    enabled = false`, 1)
	src = strings.Replace(src, "  periodic {", "  parameterized {\n    meta_required = [\"input\"]\n  }\n  periodic {", 1)
	job, err = Parse("nightly.hcl", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if job.Periodic.Spec != "@daily" || *job.Periodic.Enabled {
		t.Fatalf("singular cron: %+v", job.Periodic)
	}
	if pj := job.ParameterizedJob; pj == nil || pj.Payload != "optional" || len(pj.MetaRequired) != 1 {
		t.Fatalf("parameterized %+v", pj)
	}
}

// TestChildrenBlocksBadInputNameFileLine: wrong types, unknown attributes
// and duplicate blocks are errors at file:line; a server problem about a
// cron is located at its attribute.
func TestChildrenBlocksBadInputNameFileLine(t *testing.T) {
	cases := []struct{ name, from, to, want string }{
		{"crons not a list", `crons            = ["0 3 * * *", "30 12 * * 1-5"]`, `crons = 5`, "nightly.hcl:5:"},
		{"unknown attribute", `prohibit_overlap = true`, `prohibit_overlaps = true`, "nightly.hcl:6:"},
		{"payload file missing", `dispatch_payload { file = "in/payload.json" }`, `dispatch_payload { }`, "nightly.hcl:13:"},
		{"max_running_children not a number", `max_running_children = 2`, `max_running_children = "two"`, "nightly.hcl:3:"},
		{"two periodic blocks", "  group \"g\" {", "  periodic {\n    cron = \"@daily\"\n  }\n  group \"g\" {", "nightly.hcl:9:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(childrenHCL, tc.from, tc.to, 1)
			if src == childrenHCL {
				t.Fatal("replacement did not apply")
			}
			_, err := Parse("nightly.hcl", []byte(src), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one at %s", err, tc.want)
			}
		})
	}
	pos := positionsOf("nightly.hcl", []byte(childrenHCL))
	got, ok := pos.Annotate(`invalid job: periodic: crons: "61 * * * *" is not a cron expression: bad minute`)
	if !ok || !strings.HasPrefix(got, "nightly.hcl:5:5: periodic: crons:") {
		t.Fatalf("annotated %q", got)
	}
	got, _ = pos.Annotate(`invalid job: group "g": task "t": dispatch_payload: file: "../x" must be a clean relative path inside local/`)
	if !strings.HasPrefix(got, "nightly.hcl:13:") {
		t.Fatalf("annotated %q", got)
	}
}
