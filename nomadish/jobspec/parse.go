// Package jobspec parses GPUlayer jobspecs, a Nomad-like HCL syntax, into
// api.Job values. It evaluates variables (var.*), locals (local.*) and HCL
// functions at parse time, and keeps runtime interpolations such as
// "${attr.kernel.name}", "${meta.rack}", "${device.attr.memory}" or
// "${NOMAD_ALLOC_ID}" as literal text for the scheduler and the client.
//
// The parser checks syntax and types only; the server validates the meaning
// of the job (structs.Job.Validate).
package jobspec

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Error is the error Parse returns for a jobspec that is not valid: the HCL
// diagnostics, sorted by position. Every diagnostic has a Subject, so it can
// be shown with hcl's diagnostic writers too.
type Error struct {
	Diagnostics hcl.Diagnostics
}

// MaxShownDiagnostics caps the diagnostics Error lists; past it they are
// counted. A jobspec of 1 MiB can make 40,000 diagnostics, and an answer
// listing them all is five times the request.
const MaxShownDiagnostics = 50

// Error lists the diagnostics one per line as "file:line:col: message": at
// most MaxShownDiagnostics of them, then how many more there were.
func (e *Error) Error() string {
	lines := make([]string, 0, min(len(e.Diagnostics), MaxShownDiagnostics+1))
	for i, d := range e.Diagnostics {
		if i == MaxShownDiagnostics {
			lines = append(lines, fmt.Sprintf("... and %d more problems", len(e.Diagnostics)-i))
			break
		}
		lines = append(lines, formatDiagnostic(d))
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the diagnostics, which errors.As can extract as
// hcl.Diagnostics.
func (e *Error) Unwrap() error {
	return e.Diagnostics
}

// formatDiagnostic renders d on one line as "file:line:col: summary: detail".
func formatDiagnostic(d *hcl.Diagnostic) string {
	pos := "<unknown>:1:1"
	if d.Subject != nil {
		pos = posString(*d.Subject)
	}
	msg := d.Summary
	if d.Detail != "" {
		msg += ": " + d.Detail
	}
	if d.Severity == hcl.DiagWarning {
		msg = "warning: " + msg
	}
	return pos + ": " + strings.Join(strings.Fields(msg), " ")
}

// posString renders the start of rng as "file:line:col".
func posString(rng hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", rng.Filename, rng.Start.Line, rng.Start.Column)
}

// ParseFile reads the jobspec at path and parses it with Parse. A file that
// cannot be read yields the *os.PathError from os.ReadFile.
func ParseFile(path string, vars map[string]string) (*api.Job, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src, vars)
}

// Parse parses the jobspec src, read from filename (used in messages only),
// into a job. vars gives values for the jobspec's variable blocks by name;
// a value for a variable the jobspec does not declare is an error. Values
// are converted to the declared type; lists, maps and objects are written
// in HCL syntax, e.g. `["a", "b"]`.
//
// Defaults follow Nomad: Type "service", Priority 50, Datacenters ["dc1"],
// group Count 1, device Count 1, constraint operator "=", affinity weight
// 50. Blocks that are absent stay nil.
//
// Every failure is an *Error whose lines read "file:line:col: message". Parse
// does not panic on any input.
func Parse(filename string, src []byte, vars map[string]string) (job *api.Job, err error) {
	defer func() {
		if r := recover(); r != nil {
			job = nil
			err = &Error{Diagnostics: hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  internalErrorSummary,
				Detail:   fmt.Sprintf("%v", r),
				Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
			}}}
		}
	}()

	job, diags := parse(filename, src, vars, &budget{left: MaxEvalWork})
	if diags.HasErrors() {
		return nil, newError(diags)
	}
	return job, nil
}

// internalErrorSummary marks a panic turned into an error; it is a bug in
// this package (the fuzz test fails on it).
const internalErrorSummary = "Internal error in the jobspec parser"

func newError(diags hcl.Diagnostics) *Error {
	sorted := make(hcl.Diagnostics, len(diags))
	copy(sorted, diags)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i].Subject, sorted[j].Subject
		if a == nil || b == nil {
			return a != nil
		}
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Start.Byte < b.Start.Byte
	})
	return &Error{Diagnostics: sorted}
}

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "job", LabelNames: []string{"name"}},
	},
}

func parse(filename string, src []byte, vars map[string]string, b *budget) (*api.Job, hcl.Diagnostics) {
	if diags := CheckNesting(filename, src); diags.HasErrors() {
		return nil, diags
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  internalErrorSummary,
			Detail:   fmt.Sprintf("unexpected body type %T", file.Body),
			Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		})
	}
	diags = append(diags, keepRuntimeInterpolations(body, src)...)
	diags = append(diags, chargeAST(body)...)
	content, moreDiags := body.Content(rootSchema)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, diags
	}

	var variables, locals, jobs hcl.Blocks
	for _, block := range content.Blocks {
		switch block.Type {
		case "variable":
			variables = append(variables, block)
		case "locals":
			locals = append(locals, block)
		case "job":
			jobs = append(jobs, block)
		}
	}
	switch len(jobs) {
	case 0:
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing job block",
			Detail:   `A jobspec needs exactly one job block, e.g. job "example" { ... }.`,
			Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		})
	case 1:
	default:
		for _, extra := range jobs[1:] {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate job block",
				Detail:   fmt.Sprintf("A jobspec holds exactly one job; the first is at %s.", posString(jobs[0].DefRange)),
				Subject:  extra.DefRange.Ptr(),
			})
		}
		return nil, diags
	}

	b.body = body
	ctx, moreDiags := evalContext(filename, variables, locals, vars, b)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, diags
	}
	d := &decoder{ctx: ctx, budget: b}
	job := d.job(jobs[0])
	diags = append(diags, d.diags...)
	return job, diags
}
