package jobspec

import (
	"strconv"
	"strings"
	"testing"
)

// TestEvalBudget: jobspecs of a few KiB that multiply themselves into
// gigabytes (nested for-expressions, doubling templates, padding, join and
// replace with long arguments, a shared value copied out) are refused
// quickly with an error naming the place; ordinary uses of the same
// features still parse.
func TestEvalBudget(t *testing.T) {
	list := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]"
	}
	var doubling strings.Builder
	doubling.WriteString(`locals {` + "\n" + `  l0 = "` + strings.Repeat("x", 1000) + `"` + "\n")
	for i := 1; i <= 40; i++ {
		doubling.WriteString("  l" + strconv.Itoa(i) + ` = "${local.l` + strconv.Itoa(i-1) + `}${local.l` + strconv.Itoa(i-1) + `}"` + "\n")
	}
	doubling.WriteString("}\n" + `job "x" { meta = { a = local.l40 } }`)
	long := strings.Repeat("a", 10000)
	for name, src := range map[string]string{
		"format width":  `job "x" { meta = { a = format("%2000000000s", "") } }`,
		"formatlist":    `job "x" { meta = { a = join(",", formatlist("%100000s", ` + list(1000) + `)) } }`,
		"indent":        `job "x" { meta = { a = indent(1000000000, "a\nb") } }`,
		"nested for":    "locals { l = " + list(1000) + " }\n" + `job "x" { meta = { a = jsonencode([for x in local.l : [for y in local.l : [for z in local.l : 1]]]) } }`,
		"doubling":      doubling.String(),
		"join":          `locals { s = "` + long + `" }` + "\n" + `job "x" { meta = { a = join(local.s, split("", local.s)) } }`,
		"replace":       `locals { s = "` + long + `" }` + "\n" + `job "x" { meta = { a = replace(local.s, "a", local.s) } }`,
		"regex_replace": `locals { s = "` + long + `" }` + "\n" + `job "x" { meta = { a = regex_replace(local.s, "", local.s) } }`,
		"shared value":  "locals {\n  l = " + list(1000) + "\n  a = [for x in local.l : local.l]\n}\n" + "job \"x\" {\n group \"g\" {\n task \"t\" {\n config {\n x = local.a\n }\n }\n }\n}",
		"flatten":       "locals {\n  l = " + list(1000) + "\n  a = [for x in local.l : local.l]\n}\n" + `job "x" { meta = { a = length(flatten(local.a)) } }`,
		"template for":  "locals { l = " + list(1000) + " }\n" + `job "x" { meta = { a = "%{ for x in local.l }%{ for y in local.l }${x}%{ endfor }%{ endfor }" } }`,
		// A loop over n elements whose body walks an n-element value:
		// after the refusal hcl/v2 runs the remaining iterations and cty
		// walks each argument before a function can refuse it, n² in
		// all unless the refusal rewrites the AST (a 40 KiB jobspec took
		// 72 s of CPU). Lists are at most MaxListElements long, so n²
		// is at most about a million here.
		"template for, deep":   "locals { l = " + list(1000) + " }\n" + `job "x" { meta = { a = "%{ for x in local.l }%{ for y in local.l }%{ for z in local.l }${x}%{ endfor }%{ endfor }%{ endfor }" } }`,
		"list past the limit":  "locals { l = " + list(1000) + " }\n" + `job "x" { meta = { a = jsonencode(concat(local.l, local.l)) } }`,
		"function in a loop":   "locals { l = " + list(1000) + " }\n" + `job "x" { meta = { a = jsonencode([for x in local.l : length(local.l)]) } }`,
		"loop in a function":   "locals { l = " + list(1000) + " }\n" + `job "x" { meta = { a = join(",", [for x in local.l : join("", [for y in local.l : "a"])]) } }`,
		"object for in a loop": "locals { l = " + list(1000) + " }\n" + `job "x" { meta = { a = jsonencode([for x in local.l : {for k, v in local.l : k => v}]) } }`,
	} {
		t.Run(name, func(t *testing.T) {
			b := &budget{left: MaxEvalWork}
			_, diags := parse("b.hcl", []byte(src), nil, b)
			if !diags.HasErrors() {
				t.Fatal("parsed, want the evaluation budget refused")
			}
			if err := newError(diags); !strings.Contains(err.Error(), "expressions build more than") || !strings.HasPrefix(err.Error(), "b.hcl:") {
				t.Fatalf("err = %.300v, want the evaluation budget at b.hcl:line:col", err)
			}
			// Work after the refusal is bounded by the AST, not by the
			// loops' lengths: each rewritten node is evaluated a few
			// more times at most as the evaluation unwinds.
			if b.late > 64 {
				t.Fatalf("%d charges after the budget was spent: the evaluation kept going", b.late)
			}
		})
	}

	ok := "locals {\n  l = " + list(100) + "\n  s = \"" + strings.Repeat("ab", 100) + "\"\n}\n" + `job "x" {
  meta = {
    a = format("%-10s|%5d", "x", 3)
    b = join(",", [for x in local.l : tostring(x)])
    c = replace(local.s, "a", "cc")
    d = indent(4, "a\nb")
    e = "${local.s}${local.s}"
    f = jsonencode(flatten([for x in local.l : [x, x]]))
    g = "%{ for x in slice(local.l, 0, 3) }${x}%{ endfor }"
  }
}`
	job, err := Parse("ok.hcl", []byte(ok), nil)
	if err != nil {
		t.Fatalf("ordinary functions refused: %v", err)
	}
	if job.Meta["a"] != "x         |    3" || job.Meta["g"] != "111" || len(job.Meta["c"]) != 300 {
		t.Fatalf("meta = %v", job.Meta)
	}
}

// BenchmarkEvalBudgetRefusal times the refusal of the costliest jobspec
// shapes the budget knows (loops over the longest lists allowed, nested
// three deep): the figure the budget exists to keep small.
func BenchmarkEvalBudgetRefusal(b *testing.B) {
	list := "[" + strings.TrimSuffix(strings.Repeat("1,", MaxListElements), ",") + "]"
	for name, body := range map[string]string{
		"template for":       `"%{ for x in local.l }%{ for y in local.l }%{ for z in local.l }${x}%{ endfor }%{ endfor }%{ endfor }"`,
		"function in a loop": `jsonencode([for x in local.l : length(local.l)])`,
		"nested for":         `jsonencode([for x in local.l : [for y in local.l : [for z in local.l : 1]]])`,
		"join of loops":      `join(",", [for x in local.l : join("", [for y in local.l : "a"])])`,
	} {
		src := []byte("locals { l = " + list + " }\n" + `job "x" { meta = { a = ` + body + ` } }`)
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := Parse("b.hcl", src, nil); err == nil {
					b.Fatal("parsed, want the evaluation budget refused")
				}
			}
		})
	}
}
