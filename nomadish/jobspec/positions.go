package jobspec

import (
	"fmt"
	"os"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Positions maps the field paths of a parsed jobspec to where they are in
// its file, so a problem the server finds (structs.Job.Validate names the
// field as `group "g": task "t": driver`) can be shown at file:line:col
// like the parser's own errors.
//
// A block's path is its type and label, joined to its parent's by ": "
// (`group "g": task "t": resources: device "nvidia/gpu"`); a repeated
// block is also reachable by its 1-based place among its siblings of the
// same type (`constraint 2`, `task 1`, `task 1: name` for its label), as
// the server names unnamed or badly named ones. An attribute's path is its block's and its name
// (`group "g": count`); the job block's own attributes have their bare
// name (`type`), and "ID" is the job's label. The zero Positions knows no
// path.
type Positions struct {
	byPath map[string]hcl.Range
}

// ParseFileWithPositions is ParseFile that also returns the positions of
// the job's fields, for Positions.Annotate. The positions are nil when
// the error is not nil.
func ParseFileWithPositions(path string, vars map[string]string) (*api.Job, *Positions, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	job, err := Parse(path, src, vars)
	if err != nil {
		return nil, nil, err
	}
	return job, positionsOf(path, src), nil
}

// positionsOf walks the syntax tree of src, which Parse accepted.
func positionsOf(filename string, src []byte) *Positions {
	p := &Positions{byPath: map[string]hcl.Range{}}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return p
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return p
	}
	for _, b := range body.Blocks {
		if b.Type != "job" {
			continue
		}
		p.byPath[""] = b.DefRange()
		if len(b.LabelRanges) > 0 {
			p.byPath["ID"] = b.LabelRanges[0]
		}
		p.walk("", b.Body)
	}
	return p
}

func join(prefix, seg string) string {
	if prefix == "" {
		return seg
	}
	return prefix + ": " + seg
}

// walk records body's attributes and blocks under prefix.
func (p *Positions) walk(prefix string, body *hclsyntax.Body) {
	for name, a := range body.Attributes {
		p.byPath[join(prefix, name)] = a.SrcRange
	}
	seen := map[string]int{}
	for _, b := range body.Blocks {
		seen[b.Type]++
		byIndex := join(prefix, fmt.Sprintf("%s %d", b.Type, seen[b.Type]))
		path := join(prefix, b.Type)
		if len(b.Labels) > 0 {
			path = join(prefix, fmt.Sprintf("%s %q", b.Type, b.Labels[0]))
		}
		for _, k := range []string{path, byIndex} {
			if _, dup := p.byPath[k]; !dup {
				p.byPath[k] = b.DefRange()
			}
		}
		// The server names a block by its place only for the block itself
		// and its name (`task 2: name: invalid name ""`), so the walk goes
		// on under the named path alone: linear in the file's size.
		if len(b.LabelRanges) > 0 {
			p.byPath[byIndex+": name"] = b.LabelRanges[0]
		}
		p.walk(path, b.Body)
	}
}

// Locate returns "file:line:col" of the longest field path that problem
// starts with (the whole problem, or a path followed by ": "), or false
// when none does.
func (p *Positions) Locate(problem string) (string, bool) {
	if p == nil {
		return "", false
	}
	best, found := "", false
	for path := range p.byPath {
		if path == "" {
			continue
		}
		if (problem == path || strings.HasPrefix(problem, path+": ")) && len(path) > len(best) {
			best, found = path, true
		}
	}
	if !found {
		return "", false
	}
	return posString(p.byPath[best]), true
}

// Annotate rewrites a validation error message of the server, "invalid
// job: PROBLEM" or "invalid job:" followed by "  * PROBLEM" lines, as
// "file:line:col: PROBLEM" lines, one per problem, the position of the
// field each problem names (or of the job block when it names none of
// the file's fields). It returns false, and msg unchanged, for a message
// of another shape.
func (p *Positions) Annotate(msg string) (string, bool) {
	if p == nil {
		return msg, false
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(msg), "invalid job:")
	if !ok {
		return msg, false
	}
	var problems []string
	if first, more, multi := strings.Cut(rest, "\n"); multi && strings.TrimSpace(first) == "" {
		for _, line := range strings.Split(more, "\n") {
			if s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "*")); s != "" {
				problems = append(problems, s)
			}
		}
	} else if s := strings.TrimSpace(rest); s != "" {
		problems = []string{s}
	}
	if len(problems) == 0 {
		return msg, false
	}
	lines := make([]string, len(problems))
	for i, prob := range problems {
		pos, ok := p.Locate(prob)
		if !ok {
			if r, has := p.byPath[""]; has {
				pos = posString(r)
			} else {
				pos = "<unknown>:1:1"
			}
		}
		lines[i] = pos + ": " + prob
	}
	return strings.Join(lines, "\n"), true
}

// ParseVarFile reads a variable file of "name = value" attributes (the
// CLI's -var-file). A string value is returned as its text; any other
// value (number, bool, list, map) as its HCL source, which Parse converts
// to the variable's declared type. A file that cannot be read yields the
// *os.PathError; one that is not such HCL yields an *Error whose lines
// read "file:line:col: message".
func ParseVarFile(path string) (map[string]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseVarSource(path, src)
}

// ParseVarSource is ParseVarFile for the content src of a variable file
// named path (in error messages), e.g. the Variables string of Nomad's
// /v1/jobs/parse request.
func ParseVarSource(path string, src []byte) (map[string]string, error) {
	// A var file is HCL too: refuse nesting hcl/v2 would overflow the
	// stack on before it parses (nesting.go).
	if diags := CheckNesting(path, src); diags.HasErrors() {
		return nil, newError(diags)
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, newError(diags)
	}
	attrs, diags := f.Body.JustAttributes()
	if diags.HasErrors() {
		return nil, newError(diags)
	}
	out := make(map[string]string, len(attrs))
	for name, a := range attrs {
		v, diags := a.Expr.Value(nil)
		if !diags.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type().FriendlyName() == "string" {
			out[name] = v.AsString()
			continue
		}
		out[name] = string(a.Expr.Range().SliceBytes(src))
	}
	return out, nil
}
