package jobspec

import (
	"fmt"
	"math"
	"math/big"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"},
		{Name: "default"},
		{Name: "description"},
	},
}

// functions returns the functions available in a jobspec: the
// deterministic, bounded part of go-cty's stdlib plus try and can. Functions
// whose output can grow far beyond their input (range, setproduct) and
// clock-dependent ones are left out.
func functions() map[string]function.Function {
	return map[string]function.Function{
		"abs":             stdlib.AbsoluteFunc,
		"can":             tryfunc.CanFunc,
		"ceil":            stdlib.CeilFunc,
		"chomp":           stdlib.ChompFunc,
		"coalesce":        stdlib.CoalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"distinct":        stdlib.DistinctFunc,
		"element":         stdlib.ElementFunc,
		"flatten":         stdlib.FlattenFunc,
		"floor":           stdlib.FloorFunc,
		"format":          stdlib.FormatFunc,
		"formatlist":      stdlib.FormatListFunc,
		"indent":          stdlib.IndentFunc,
		"join":            stdlib.JoinFunc,
		"jsondecode":      boundedJSONDecodeFunc,
		"jsonencode":      stdlib.JSONEncodeFunc,
		"keys":            stdlib.KeysFunc,
		"length":          stdlib.LengthFunc,
		"log":             stdlib.LogFunc,
		"lookup":          stdlib.LookupFunc,
		"lower":           stdlib.LowerFunc,
		"max":             stdlib.MaxFunc,
		"merge":           stdlib.MergeFunc,
		"min":             stdlib.MinFunc,
		"parseint":        stdlib.ParseIntFunc,
		"regex":           stdlib.RegexFunc,
		"regexall":        stdlib.RegexAllFunc,
		"regex_replace":   stdlib.RegexReplaceFunc,
		"replace":         stdlib.ReplaceFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setunion":        stdlib.SetUnionFunc,
		"signum":          stdlib.SignumFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"split":           stdlib.SplitFunc,
		"strrev":          stdlib.ReverseFunc,
		"substr":          stdlib.SubstrFunc,
		"title":           stdlib.TitleFunc,
		"tobool":          stdlib.MakeToFunc(cty.Bool),
		"tolist":          stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":           stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber":        stdlib.MakeToFunc(cty.Number),
		"toset":           stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring":        stdlib.MakeToFunc(cty.String),
		"trim":            stdlib.TrimFunc,
		"trimprefix":      stdlib.TrimPrefixFunc,
		"trimspace":       stdlib.TrimSpaceFunc,
		"trimsuffix":      stdlib.TrimSuffixFunc,
		"try":             tryfunc.TryFunc,
		"upper":           stdlib.UpperFunc,
		"values":          stdlib.ValuesFunc,
		"zipmap":          stdlib.ZipmapFunc,
	}
}

// evalContext builds the context the job block is evaluated in: var.* from
// the variable blocks and vars, local.* from the locals blocks, and the
// functions. It reports every problem with variables and locals.
//
// Every function, for-expression and template is charged to b (see
// MaxEvalWork).
func evalContext(filename string, variables, locals hcl.Blocks, vars map[string]string, b *budget) (*hcl.EvalContext, hcl.Diagnostics) {
	ctx := &hcl.EvalContext{Functions: boundedFunctions(b)}
	varVals, diags := evalVariables(filename, variables, vars, ctx)
	ctx.Variables = map[string]cty.Value{"var": cty.ObjectVal(varVals)}
	localVals, moreDiags := evalLocals(locals, ctx)
	diags = append(diags, moreDiags...)
	ctx.Variables["local"] = cty.ObjectVal(localVals)
	return ctx, diags
}

// evalVariables evaluates the variable blocks: the value from vars when
// given (converted to the declared type), else the default. Values in vars
// for undeclared variables are errors.
func evalVariables(filename string, blocks hcl.Blocks, vars map[string]string, funcs *hcl.EvalContext) (map[string]cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	vals := make(map[string]cty.Value)
	declared := make(map[string]*hcl.Block)
	for _, block := range blocks {
		name := block.Labels[0]
		if !hclsyntax.ValidIdentifier(name) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid variable name",
				Detail:   fmt.Sprintf("%q is not a valid variable name: use letters, digits, underscores and dashes, starting with a letter.", name),
				Subject:  block.LabelRanges[0].Ptr(),
			})
			continue
		}
		if prev, dup := declared[name]; dup {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate variable",
				Detail:   fmt.Sprintf("Variable %q was already declared at %s.", name, posString(prev.DefRange)),
				Subject:  block.DefRange.Ptr(),
			})
			continue
		}
		declared[name] = block
		val, moreDiags := evalVariable(name, block, vars, funcs)
		diags = append(diags, moreDiags...)
		vals[name] = val
	}

	given := make([]string, 0, len(vars))
	for name := range vars {
		given = append(given, name)
	}
	sort.Strings(given)
	for _, name := range given {
		if _, ok := declared[name]; ok {
			continue
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Undeclared variable",
			Detail:   fmt.Sprintf("A value was given for variable %q, but the jobspec has no variable block of that name.", name),
			Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		})
	}
	return vals, diags
}

// evalVariable evaluates one variable block. On error the value is
// cty.DynamicVal, so that later references do not report again.
func evalVariable(name string, block *hcl.Block, vars map[string]string, funcs *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	content, diags := block.Body.Content(variableSchema)
	if diags.HasErrors() {
		return cty.DynamicVal, diags
	}
	ty := cty.DynamicPseudoType
	if attr, ok := content.Attributes["type"]; ok {
		t, moreDiags := typeexpr.TypeConstraint(attr.Expr)
		diags = append(diags, moreDiags...)
		if moreDiags.HasErrors() {
			return cty.DynamicVal, diags
		}
		ty = t
	}
	if attr, ok := content.Attributes["description"]; ok {
		v, moreDiags := attr.Expr.Value(funcs)
		diags = append(diags, moreDiags...)
		if !moreDiags.HasErrors() {
			if _, err := convert.Convert(v, cty.String); err != nil {
				diags = append(diags, typeDiag("description", attr.Expr.Range(), err))
			}
		}
	}

	if raw, ok := vars[name]; ok {
		v, moreDiags := varValue(name, raw, ty, funcs)
		if moreDiags.HasErrors() {
			// The value came from outside the file: point at the
			// variable block and say where the value came from.
			for _, d := range moreDiags {
				if d.Subject != nil && d.Subject.Filename != block.DefRange.Filename {
					d.Detail = fmt.Sprintf("In the value given for variable %q (%s, column %d): %s", name, d.Summary, d.Subject.Start.Column, d.Detail)
					d.Summary = "Invalid value for variable"
				}
				d.Subject = block.DefRange.Ptr()
				d.Context = nil
			}
			return cty.DynamicVal, append(diags, moreDiags...)
		}
		return v, diags
	}

	attr, ok := content.Attributes["default"]
	if !ok {
		return cty.DynamicVal, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing variable value",
			Detail:   fmt.Sprintf("Variable %q has no default, so a value must be given for it.", name),
			Subject:  block.DefRange.Ptr(),
		})
	}
	v, moreDiags := attr.Expr.Value(funcs)
	diags = append(diags, moreDiags...)
	if moreDiags.HasErrors() {
		return cty.DynamicVal, diags
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		return cty.DynamicVal, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid default value for variable",
			Detail:   fmt.Sprintf("The default of variable %q does not fit its type %s: %s.", name, typeexpr.TypeString(ty), err),
			Subject:  attr.Expr.Range().Ptr(),
		})
	}
	return cv, diags
}

// varValue converts a value given on the command line to ty. Strings,
// numbers and booleans are taken as they are; other types are parsed as an
// HCL expression, e.g. `["a", "b"]`.
func varValue(name, raw string, ty cty.Type, funcs *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	v := cty.StringVal(raw)
	if !ty.IsPrimitiveType() && ty != cty.DynamicPseudoType {
		filename := fmt.Sprintf("<value for var.%s>", name)
		if diags := CheckExpressionNesting(filename, []byte(raw)); diags.HasErrors() {
			return cty.DynamicVal, diags
		}
		expr, diags := hclsyntax.ParseExpression([]byte(raw), filename, hcl.InitialPos)
		if diags.HasErrors() {
			return cty.DynamicVal, diags
		}
		// astCharger only rewrites; it reports nothing.
		_ = hclsyntax.Walk(expr, astCharger{})
		var moreDiags hcl.Diagnostics
		v, moreDiags = expr.Value(funcs)
		if moreDiags.HasErrors() {
			return cty.DynamicVal, moreDiags
		}
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		return cty.DynamicVal, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf("The value given for variable %q does not fit its type %s: %s.", name, typeexpr.TypeString(ty), err),
		}}
	}
	return cv, nil
}

// evalLocals evaluates the locals blocks in dependency order. ctx must hold
// var and the functions; it gains local as values resolve.
func evalLocals(blocks hcl.Blocks, ctx *hcl.EvalContext) (map[string]cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	pending := make(map[string]*hcl.Attribute)
	for _, block := range blocks {
		attrs, moreDiags := block.Body.JustAttributes()
		diags = append(diags, moreDiags...)
		for name, attr := range attrs {
			if prev, dup := pending[name]; dup {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Duplicate local value",
					Detail:   fmt.Sprintf("Local value %q was already defined at %s.", name, posString(prev.NameRange)),
					Subject:  attr.NameRange.Ptr(),
				})
				continue
			}
			pending[name] = attr
		}
	}

	vals := make(map[string]cty.Value)
	for len(pending) > 0 {
		names := make([]string, 0, len(pending))
		for name := range pending {
			names = append(names, name)
		}
		sort.Strings(names)
		progress := false
		for _, name := range names {
			attr := pending[name]
			if dependsOnPending(attr.Expr, pending) {
				continue
			}
			ctx.Variables["local"] = cty.ObjectVal(vals)
			v, moreDiags := attr.Expr.Value(ctx)
			diags = append(diags, moreDiags...)
			if moreDiags.HasErrors() {
				v = cty.DynamicVal
			}
			vals[name] = v
			delete(pending, name)
			progress = true
		}
		if !progress {
			for _, name := range names {
				attr := pending[name]
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Cycle in local values",
					Detail:   fmt.Sprintf("Local value %q depends, directly or through other locals, on itself.", name),
					Subject:  attr.Expr.Range().Ptr(),
				})
			}
			break
		}
	}
	return vals, diags
}

// dependsOnPending reports whether expr refers to a local value still in
// pending. A bare "local" refers to all of them.
func dependsOnPending(expr hcl.Expression, pending map[string]*hcl.Attribute) bool {
	for _, trav := range expr.Variables() {
		if trav.RootName() != "local" {
			continue
		}
		if len(trav) < 2 {
			return true
		}
		var name string
		switch step := trav[1].(type) {
		case hcl.TraverseAttr:
			name = step.Name
		case hcl.TraverseIndex:
			if step.Key.Type() != cty.String || step.Key.IsNull() || !step.Key.IsKnown() {
				return true
			}
			name = step.Key.AsString()
		default:
			return true
		}
		if _, ok := pending[name]; ok {
			return true
		}
	}
	return false
}

// toGo converts a wholly known cty value to the JSON-like Go value used in
// api.Task.Config: string, int (whole numbers that fit) or float64, bool,
// []interface{}, map[string]interface{}, or nil for null.
func toGo(v cty.Value) (interface{}, error) {
	v, _ = v.UnmarkDeep()
	if !v.IsWhollyKnown() {
		return nil, fmt.Errorf("the value is not known until the job runs")
	}
	if v.IsNull() {
		return nil, nil
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		return v.AsString(), nil
	case ty == cty.Bool:
		return v.True(), nil
	case ty == cty.Number:
		return number(v.AsBigFloat())
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		out := make([]interface{}, 0, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			gv, err := toGo(ev)
			if err != nil {
				return nil, err
			}
			out = append(out, gv)
		}
		return out, nil
	case ty.IsMapType() || ty.IsObjectType():
		out := make(map[string]interface{}, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			gv, err := toGo(ev)
			if err != nil {
				return nil, err
			}
			out[k.AsString()] = gv
		}
		return out, nil
	default:
		return nil, fmt.Errorf("a value of type %s cannot be used here", ty.FriendlyName())
	}
}

// number converts bf to an int when it is whole and fits, else to a finite
// float64.
func number(bf *big.Float) (interface{}, error) {
	if bf.IsInt() {
		if i, acc := bf.Int64(); acc == big.Exact && i >= math.MinInt && i <= math.MaxInt {
			return int(i), nil
		}
	}
	f, _ := bf.Float64()
	if math.IsInf(f, 0) {
		return nil, fmt.Errorf("the number %s is out of range", bf.Text('g', 10))
	}
	return f, nil
}
