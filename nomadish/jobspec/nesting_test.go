package jobspec

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestCheckNesting(t *testing.T) {
	wrap := func(expr string) string { return `job "x" { meta = { a = ` + expr + " } }" }
	// job { meta = { a = ... } } already holds 2 levels (job body, meta object).
	const used = 2
	cases := []struct {
		name, src string
		want      string // "" for accepted, else a word of the summary
	}{
		{"lists at the limit", wrap(strings.Repeat("[", MaxNestingDepth-used) + strings.Repeat("]", MaxNestingDepth-used)), ""},
		{"lists past the limit", wrap(strings.Repeat("[", MaxNestingDepth-used+1) + strings.Repeat("]", MaxNestingDepth-used+1)), "Nesting too deep"},
		{"objects", wrap(strings.Repeat("{b=", 100) + "1" + strings.Repeat("}", 100)), "Nesting too deep"},
		{"parens", wrap(strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100)), "Nesting too deep"},
		{"calls", wrap(strings.Repeat("abs(", 100) + "1" + strings.Repeat(")", 100)), "Nesting too deep"},
		{"blocks", strings.Repeat("a {\n", 100) + strings.Repeat("}\n", 100), "Nesting too deep"},
		{"templates", wrap(`"` + strings.Repeat(`${"`, 40) + strings.Repeat(`"}`, 40) + `"`), "Nesting too deep"},
		{"directives", "job \"x\" { name = <<EOT\n" + strings.Repeat("%{ if true }", 70) + strings.Repeat("%{ endif }", 70) + "\nEOT\n}", "Nesting too deep"},
		{"many directives in a row", "job \"x\" { name = <<EOT\n" + strings.Repeat("%{ if true }a%{ endif }", 200) + "\nEOT\n}", ""},
		{"sequential lists", wrap("[" + strings.Repeat("[1], ", 1000) + "]"), ""},
		{"brackets in a string", wrap(`"` + strings.Repeat("[{(", 1000) + `"`), ""},
		{"brackets in a comment", "# " + strings.Repeat("[{(", 1000) + "\n" + `job "x" {}`, ""},
		{"brackets in a block comment", "/* " + strings.Repeat("[{(", 1000) + " */\n" + `job "x" {}`, ""},
		{"brackets in a heredoc", "job \"x\" { name = <<EOT\n" + strings.Repeat("[{(", 1000) + "\nEOT\n}", ""},
		{"escaped interpolation", wrap(`"` + strings.Repeat("$${", 1000) + `"`), ""},
		{"binary chain", wrap(strings.Repeat("1+", MaxExpressionOperators+1) + "1"), "Expression nests too deep"},
		{"binary chain at the limit", wrap(strings.Repeat("1+", MaxExpressionOperators-1) + "1"), ""},
		{"unary chain", wrap(strings.Repeat("-", MaxExpressionOperators+1) + "1"), "Expression nests too deep"},
		{"ternary chain", wrap(strings.Repeat("true ? 1 : ", MaxExpressionOperators)), "Expression nests too deep"},
		{"index chain", wrap("[1]" + strings.Repeat("[0]", MaxExpressionOperators+1)), "Expression nests too deep"},
		{"chain across lines in parens", wrap("(" + strings.Repeat("1 +\n", MaxExpressionOperators+1) + "1)"), "Expression nests too deep"},
		{"many short expressions", strings.Repeat("a = 1 + 2 + 3\n", 1000), ""},
		{"many list items", wrap("[" + strings.Repeat("-1, ", MaxListElements-1) + "-1]"), ""},
		{"too many list items", wrap("[" + strings.Repeat("-1, ", MaxListElements) + "-1]"), "List too long"},
		{"nested lists count apart", wrap("[" + strings.Repeat("[1, 2], ", MaxListElements-1) + "[1]]"), ""},
		{"huge exponent", wrap("1e9999999"), "Number too large"},
		{"huge negative exponent", wrap("1e-9999999"), "Number too large"},
		{"long number", wrap(strings.Repeat("9", MaxNumberLiteral+1)), "Number too large"},
		{"float64 range", wrap("[1.5e308, 2e-308, 123456789012345678901234567890]"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			diags := CheckNesting("n.hcl", []byte(tc.src))
			switch {
			case tc.want == "" && diags.HasErrors():
				t.Fatalf("refused: %s", diags.Error())
			case tc.want != "" && !diags.HasErrors():
				t.Fatal("accepted")
			case tc.want != "" && !strings.Contains(diags[0].Summary, tc.want):
				t.Fatalf("summary %q, want %q", diags[0].Summary, tc.want)
			case tc.want != "" && (diags[0].Subject == nil || diags[0].Subject.Filename != "n.hcl"):
				t.Fatalf("no position in the file: %+v", diags[0].Subject)
			}
		})
	}
}

// TestParseRefusesDeepNesting checks the limits through Parse (the path
// of POST /v1/jobs/parse and `job run`), var values and jsondecode.
func TestParseRefusesDeepNesting(t *testing.T) {
	var perr *Error
	_, err := Parse("deep.hcl", []byte(`job "x" { meta = { a = `+strings.Repeat("[", 100000)+` } }`), nil)
	if !errors.As(err, &perr) || !regexp.MustCompile(`^deep\.hcl:1:\d+: Nesting too deep`).MatchString(err.Error()) {
		t.Fatalf("deep list: %v", err)
	}
	src := "variable \"v\" { type = list(any) }\njob \"x\" {}"
	_, err = Parse("v.hcl", []byte(src), map[string]string{"v": strings.Repeat("[", 100000)})
	if err == nil || !strings.Contains(err.Error(), `variable "v"`) || !strings.Contains(err.Error(), "Nesting too deep") {
		t.Fatalf("deep var value: %v", err)
	}
	deepJSON := strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1)
	_, err = Parse("j.hcl", []byte(`job "x" { meta = { a = jsonencode(jsondecode("`+deepJSON+`")) } }`), nil)
	if err == nil || !strings.Contains(err.Error(), "JSON nested") {
		t.Fatalf("deep jsondecode: %v", err)
	}
	okJSON := strings.Repeat("[", 10) + "1" + strings.Repeat("]", 10)
	if _, err := Parse("j.hcl", []byte(`job "x" { meta = { a = jsonencode(jsondecode("`+okJSON+`")) } }`), nil); err != nil {
		t.Fatalf("shallow jsondecode: %v", err)
	}
}

// TestCheckNestingAcceptsExamples keeps every shipped jobspec within the limits.
func TestCheckNestingAcceptsExamples(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.hcl")
	examples, _ := filepath.Glob("../../examples/*.hcl")
	for _, p := range append(paths, examples...) {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if diags := CheckNesting(p, src); diags.HasErrors() {
			t.Errorf("%s: %s", p, diags.Error())
		}
	}
}

func TestJSONDepth(t *testing.T) {
	for in, want := range map[string]int{
		`1`: 0, `[]`: 1, `{"a":[{}]}`: 3, `["[[[["]`: 1, `["\"[["]`: 1, `[[[`: 3,
	} {
		if got := JSONDepth([]byte(in)); got != want {
			t.Errorf("JSONDepth(%s) = %d, want %d", in, got, want)
		}
	}
}

// FuzzHCLDepth checks that CheckNesting never panics, that a refusal points
// into the source, and that whatever it accepts Parse handles without a
// panic (a stack overflow would kill the fuzz worker and be reported).
func FuzzHCLDepth(f *testing.F) {
	for _, s := range []string{
		`job "x" { meta = { a = [[[1]]] } }`,
		"job \"x\" { name = <<EOT\n%{ if true }${\"a\"}%{ endif }\nEOT\n}",
		`job "x" { priority = -(-(1+2)) ? 1 : 2 }`,
		`a = "${"${"${1}"}"}"`,
		"/* [[[ */ # {{{\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		diags := CheckNesting("f.hcl", src)
		if diags.HasErrors() {
			if s := diags[0].Subject; s == nil || s.Filename != "f.hcl" || s.Start.Byte > len(src) {
				t.Fatalf("refusal without a position in the source: %+v", s)
			}
			return
		}
		_, _ = Parse("f.hcl", src, nil)
	})
}

// TestJSONTooDeep: the offset of the first bracket past the limit, with
// brackets inside strings (escaped quotes too) not counted.
func TestJSONTooDeep(t *testing.T) {
	cases := []struct {
		in    string
		limit int
		want  int
	}{
		{`[[["x"]]]`, 2, 2},
		{`[[["x"]]]`, 3, -1},
		{`{"a":"[[[[","b":[1]}`, 1, 16},
		{`["\"[[[["]`, 1, -1},
		{`1`, 0, -1},
	}
	for _, tc := range cases {
		if got := JSONTooDeep([]byte(tc.in), tc.limit); got != tc.want {
			t.Errorf("JSONTooDeep(%s, %d) = %d, want %d", tc.in, tc.limit, got, tc.want)
		}
	}
}
