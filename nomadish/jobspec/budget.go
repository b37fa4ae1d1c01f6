package jobspec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// MaxEvalWork bounds what evaluating one jobspec may build: 8 Mi units,
// where a byte of a string is one unit and an element of a list, set, map
// or object (or one for-expression iteration) is 64. Every for-expression
// collection, every template interpolation, every function's arguments and
// result and every attribute value are charged, so a small jobspec cannot
// multiply itself into gigabytes or minutes of work (nested
// for-expressions over a long list, a template that doubles a local a few
// dozen times, join or replace with a long separator,
// format("%2000000000s")). A job must fit a 1 MiB request body anyway; a
// real jobspec uses a few thousand units.
const MaxEvalWork = 8 << 20

// elementUnits is the charge of one collection element.
const elementUnits = 64

// budgetFunc is the name of the hidden function the parser wraps around
// for-expression collections and template parts to charge them.
const budgetFunc = "gpulayer_eval_budget"

// budget is the work left to one Parse.
type budget struct {
	left int
	// body is the AST being evaluated. Once the budget is spent, spend
	// rewrites it so that what is still being evaluated finishes at
	// once: hcl/v2 goes on with every remaining iteration of a
	// for-expression after an error, and cty walks each function
	// argument before any function (ours included) can refuse it, so
	// without this a loop over n elements calling a function on an
	// n-element value costs n² walks after the refusal (a 40 KiB jobspec
	// took 72 s).
	body  *hclsyntax.Body
	spent bool
	// late counts the charges asked for after the budget was spent: the
	// work the evaluation did on its way out (tests bound it).
	late int
}

// spend empties the budget, neutralizes the AST the first time, and
// returns errBudget.
func (b *budget) spend() error {
	b.left = 0
	if !b.spent {
		b.spent = true
		if b.body != nil {
			hclsyntax.Walk(b.body, neutralizer{})
		}
	}
	return errBudget
}

// neutralizer rewrites every expression that can repeat or walk work into
// a literal, children first: for-expressions skip their remaining iterations (a false
// condition, read at each one) and get empty collections; function calls
// get unknown arguments; templates, tuples and objects lose their parts.
// Evaluation then yields only the budget's errors.
type neutralizer struct{}

// Enter implements hclsyntax.Walker.
func (neutralizer) Enter(hclsyntax.Node) hcl.Diagnostics { return nil }

// Exit implements hclsyntax.Walker. It rewrites a node after its children,
// so that nodes under an argument or part it replaces (a loop already
// running inside a function argument) are rewritten too.
func (neutralizer) Exit(node hclsyntax.Node) hcl.Diagnostics {
	lit := func(e hclsyntax.Expression, v cty.Value) hclsyntax.Expression {
		return &hclsyntax.LiteralValueExpr{Val: v, SrcRange: e.Range()}
	}
	switch e := node.(type) {
	case *hclsyntax.ForExpr:
		e.CondExpr = lit(e, cty.False)
		e.CollExpr = lit(e.CollExpr, cty.EmptyTupleVal)
		e.ValExpr = lit(e.ValExpr, cty.DynamicVal)
		if e.KeyExpr != nil {
			e.KeyExpr = lit(e.KeyExpr, cty.DynamicVal)
		}
	case *hclsyntax.FunctionCallExpr:
		for i, a := range e.Args {
			e.Args[i] = lit(a, cty.DynamicVal)
		}
		e.ExpandFinal = false
	case *hclsyntax.TemplateExpr:
		e.Parts = []hclsyntax.Expression{lit(e, cty.StringVal(""))}
	case *hclsyntax.TupleConsExpr:
		e.Exprs = nil
	case *hclsyntax.ObjectConsExpr:
		e.Items = nil
	case *hclsyntax.SplatExpr:
		e.Source = lit(e.Source, cty.EmptyTupleVal)
	}
	return nil
}

// errBudget is the error of a spent budget.
var errBudget = fmt.Errorf("the jobspec's expressions build more than %d units (a string byte is 1, a list or map element %d); "+
	"the limit keeps one jobspec from exhausting the agent's memory", MaxEvalWork, elementUnits)

// charge takes the size of v from the budget; it fails once the budget is
// spent.
func (b *budget) charge(v cty.Value) error {
	if b.spent {
		b.late++
		return errBudget
	}
	n := valueSize(v, b.left+1)
	if n > b.left {
		return b.spend()
	}
	b.left -= n
	return nil
}

// take takes n units from the budget; it fails once the budget is spent.
func (b *budget) take(n int) error {
	if b.spent {
		b.late++
		return errBudget
	}
	if n > b.left {
		return b.spend()
	}
	b.left -= n
	return nil
}

// valueSize returns the units of v (see MaxEvalWork), counting at most
// limit: it stops once the count passes limit, so it is cheap on any value,
// however much of it is shared.
func valueSize(v cty.Value, limit int) int {
	n := 0
	stack := []cty.Value{v}
	for len(stack) > 0 && n <= limit {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		v, _ = v.Unmark()
		if !v.IsKnown() || v.IsNull() {
			n++
			continue
		}
		ty := v.Type()
		switch {
		case ty == cty.String:
			n += len(v.AsString())
		case ty.IsListType() || ty.IsSetType() || ty.IsTupleType() || ty.IsMapType() || ty.IsObjectType():
			if v.LengthInt() > MaxListElements {
				// Over the limit on any collection (nesting.go): as good
				// as spending the whole budget.
				return limit + 1
			}
			n += elementUnits
			for it := v.ElementIterator(); it.Next() && n <= limit; {
				_, ev := it.Element()
				n += elementUnits
				stack = append(stack, ev)
			}
		default:
			n++
		}
	}
	return n
}

// budgetFunction returns the hidden function that charges its argument to
// b and returns it unchanged.
func budgetFunction(b *budget) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{
			Name: "value", Type: cty.DynamicPseudoType,
			AllowNull: true, AllowUnknown: true, AllowDynamicType: true, AllowMarked: true,
		}},
		Type: func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			// Each evaluation costs an element's units on top of its
			// size: a template part that renders a number to "1" still
			// costs a big-float conversion (about 10 µs), so a jobspec
			// cannot buy millions of them for one unit each.
			if err := b.take(elementUnits); err != nil {
				return cty.DynamicVal, err
			}
			if err := b.charge(args[0]); err != nil {
				return cty.DynamicVal, err
			}
			return args[0], nil
		},
	})
}

// chargeAST rewrites body in place so evaluation charges b: the collection
// of every for-expression and every non-literal part of every template
// becomes gpulayer_eval_budget(expr). Run it after
// keepRuntimeInterpolations.
func chargeAST(body *hclsyntax.Body) hcl.Diagnostics {
	return hclsyntax.Walk(body, astCharger{})
}

type astCharger struct{}

func wrapBudget(e hclsyntax.Expression) hclsyntax.Expression {
	rng := e.Range()
	return &hclsyntax.FunctionCallExpr{
		Name: budgetFunc, Args: []hclsyntax.Expression{e},
		NameRange: rng, OpenParenRange: rng, CloseParenRange: rng,
	}
}

// Enter implements hclsyntax.Walker.
func (astCharger) Enter(node hclsyntax.Node) hcl.Diagnostics {
	switch e := node.(type) {
	case *hclsyntax.ForExpr:
		e.CollExpr = wrapBudget(e.CollExpr)
	case *hclsyntax.TemplateExpr:
		for i, part := range e.Parts {
			if _, lit := part.(*hclsyntax.LiteralValueExpr); !lit {
				e.Parts[i] = wrapBudget(part)
			}
		}
	}
	return nil
}

// Exit implements hclsyntax.Walker.
func (astCharger) Exit(hclsyntax.Node) hcl.Diagnostics { return nil }

// charged wraps f so that its arguments are charged to b before it runs
// and its result after, and refuses up front the calls whose result would
// be far larger than their arguments (see amplification).
func charged(name string, f function.Function, b *budget) function.Function {
	spec := &function.Spec{
		Description: f.Description(),
		Params:      f.Params(),
		VarParam:    f.VarParam(),
		Type: func(args []cty.Value) (cty.Type, error) {
			// Some functions (flatten) walk their arguments already to
			// find the result type: check the size first, without
			// charging (Impl charges).
			if b.spent {
				b.late++
				return cty.NilType, errBudget
			}
			total := 0
			for _, a := range args {
				total += valueSize(a, b.left+1-total)
				if total > b.left {
					return cty.NilType, b.spend()
				}
			}
			return f.ReturnTypeForValues(args)
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			for _, a := range args {
				if err := b.charge(a); err != nil {
					return cty.DynamicVal, err
				}
			}
			if n := amplification(name, args); n > b.left {
				return cty.DynamicVal, b.spend()
			}
			v, err := f.Call(args)
			if err != nil {
				return v, err
			}
			if err := b.charge(v); err != nil {
				return cty.DynamicVal, err
			}
			return v, nil
		},
	}
	return function.New(spec)
}

// boundedFunctions returns the jobspec functions, each charged to b (try
// and can, which take unevaluated expressions, as they are), and the hidden
// budget function.
func boundedFunctions(b *budget) map[string]function.Function {
	out := functions()
	for name, f := range out {
		if name == "try" || name == "can" {
			continue
		}
		out[name] = charged(name, f, b)
	}
	out[budgetFunc] = budgetFunction(b)
	return out
}

// fmtWidth finds the width and precision figures of a format verb.
var fmtWidth = regexp.MustCompile(`%[-+# 0]*(\d*)(?:\.(\d*))?`)

// amplification returns an upper bound, in units, on the result of the
// functions whose result can be much larger than their arguments, or 0 for
// the others (whose result the budget charges after the call).
func amplification(name string, args []cty.Value) int {
	str := func(i int) string {
		if i >= len(args) || !args[i].IsKnown() || args[i].IsNull() || args[i].Type() != cty.String {
			return ""
		}
		s, _ := args[i].Unmark()
		return s.AsString()
	}
	num := func(i int) int {
		if i >= len(args) || !args[i].IsKnown() || args[i].IsNull() || args[i].Type() != cty.Number {
			return 0
		}
		v, _ := args[i].Unmark()
		f, _ := v.AsBigFloat().Float64()
		if f > MaxEvalWork {
			return MaxEvalWork + 1
		}
		return max(int(f), 0)
	}
	length := func(i int) int {
		if i >= len(args) || !args[i].IsKnown() || args[i].IsNull() || !args[i].CanIterateElements() {
			return 0
		}
		v, _ := args[i].Unmark()
		return v.LengthInt()
	}
	switch name {
	case "format", "formatlist":
		// Each verb may pad to its width or precision.
		pad := 0
		for _, m := range fmtWidth.FindAllStringSubmatch(str(0), -1) {
			for _, d := range m[1:] {
				if n, err := strconv.Atoi(d); err == nil {
					pad += min(n, MaxEvalWork+1)
				} else if d != "" {
					pad += MaxEvalWork + 1
				}
			}
		}
		if name == "formatlist" {
			rows := 1
			for i := 1; i < len(args); i++ {
				rows = max(rows, length(i))
			}
			return pad * rows
		}
		return pad
	case "indent":
		return num(0) * (strings.Count(str(1), "\n") + 1)
	case "join":
		// join(separator, lists...): one separator between each element.
		n := 0
		for i := 1; i < len(args); i++ {
			n += length(i)
		}
		return len(str(0)) * n
	case "replace", "regex_replace":
		// Every byte (an empty or regexp match) may become the
		// replacement.
		return (len(str(0)) + 1) * len(str(2))
	}
	return 0
}

// ChargedContext rewrites body in place so that its for-expressions and
// templates are charged to a fresh budget of MaxEvalWork, and returns the
// evaluation context that holds the budget (and no other function). Use it
// for HCL outside jobspecs (the agent config) evaluated without
// functions: gohcl.DecodeBody(body, ChargedContext(body), &cfg). A body
// past the budget yields diagnostics that name the place.
func ChargedContext(body *hclsyntax.Body) *hcl.EvalContext {
	b := &budget{left: MaxEvalWork, body: body}
	chargeAST(body)
	return &hcl.EvalContext{Functions: map[string]function.Function{budgetFunc: budgetFunction(b)}}
}
