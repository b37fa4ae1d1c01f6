package jobspec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	fuzzDiagLine = regexp.MustCompile(`^fuzz\.hcl:\d+:\d+: \S`)
	fuzzMoreLine = regexp.MustCompile(`^\.\.\. and \d+ more problems$`)
)

// FuzzParse checks that Parse never panics, that every failure is an *Error
// whose lines read "fuzz.hcl:line:col: message", and that every job it
// returns encodes as JSON.
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*.hcl")
	if err != nil {
		f.Fatal(err)
	}
	examples, err := filepath.Glob("../../examples/*.hcl")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range append(seeds, examples...) {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, s := range []string{
		"",
		`job "a" { group "g" { count = 1.5 } }`,
		`job "a" { type = "%{ if attr.x }y%{ endif }" }`,
		`locals { a = local.a }` + "\n" + `job "a" {}`,
		`job "a" { group "g" { task "t" { config { x = [for k, v in {a = 1} : "${k}${attr.y}"] } } } }`,
		`job "a" { meta = { a = null } }`,
		`variable "v" { type = list(number) }` + "\n" + `job "a" {}`,
		`job "a" { group "g" { reschedule { delay = "5s" delay_function = "exponential" max_delay = "1h" } } }`,
		// Ports and services.
		`job "a" { group "g" { network { port "http" { to = 8000 } port "x" { static = 9 } } service { name = "s" port = "http" check { type = "http" path = "/" interval = "1s" timeout = "1s" } } } }`,
		`job "a" { update { canary = 1 } group "g" { update { max_parallel = 2 max_unavailable = 0 min_healthy_time = "1x" } } }`,
		`job "a" { group "g" { update { health_check = "manual" auto_revert = true auto_promote = "yes" } update {} } }`,
		`job "a" { type = "batch" group "g" { max_run_duration = "3s" task "t" { max_run_duration = "-1ns" } } }`,
		// Endpoints.
		`job "a" { group "g" { count = 3 network { port "http" {} } endpoint { name = "e" port = 9000 model = "m" policy = "least_outstanding" models_path = "/v1/models" member_port = "http" } } }`,
		`job "a" { group "g" { endpoint { name = "E_" port = 1e9 model = null } endpoint {} } }`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		job, err := Parse("fuzz.hcl", src, nil)
		if err != nil {
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("error is %T, want *Error: %v", err, err)
			}
			if job != nil {
				t.Fatal("job returned with an error")
			}
			for _, d := range perr.Diagnostics {
				if d.Summary == internalErrorSummary {
					t.Fatalf("parser panicked: %s", d.Detail)
				}
			}
			lines := strings.Split(err.Error(), "\n")
			if len(perr.Diagnostics) > MaxShownDiagnostics {
				// The count of the diagnostics not listed (Error).
				if last := lines[len(lines)-1]; !fuzzMoreLine.MatchString(last) {
					t.Fatalf("last line %q of %d diagnostics does not count the rest", last, len(perr.Diagnostics))
				}
				lines = lines[:len(lines)-1]
			}
			for _, line := range lines {
				if !fuzzDiagLine.MatchString(line) {
					t.Fatalf("line %q does not read file:line:col: message", line)
				}
			}
			return
		}
		if job == nil {
			t.Fatal("nil job without an error")
		}
		if _, err := json.Marshal(job); err != nil {
			t.Fatalf("job does not encode as JSON: %v", err)
		}
	})
}
