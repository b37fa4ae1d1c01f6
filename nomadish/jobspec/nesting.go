package jobspec

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// MaxNestingDepth is the deepest nesting CheckNesting accepts: blocks,
// objects, tuples, parentheses, function calls, strings, heredocs, template
// interpolations ("${", "%{") and template directives (%{ if } and
// %{ for } bodies) together. hcl/v2 parses and evaluates nesting by Go
// recursion, and a Go stack overflow is fatal (no recover catches it), so
// one request nested some 100000 levels deep would exit the agent. A real
// jobspec nests about 10 levels (job, group, task, config, a map, a list, a
// string, an interpolation); 64 leaves ample room.
const MaxNestingDepth = 64

// MaxExpressionOperators is the most operators (arithmetic, comparison,
// logical, unary, conditional "?" and ":", and indexing brackets) one
// expression may chain at one nesting level. A chain such as "1+1+...+1"
// or "- - - 1" has no brackets yet builds a syntax tree as deep as it is
// long, which hcl/v2 walks and evaluates by recursion.
const MaxExpressionOperators = 500

// MaxListElements is the most elements a list literal ([...]) may hold,
// and the most any list, set, map or object built while evaluating a
// jobspec may hold (budget.go). cty unifies the element types of a tuple
// it converts to a list (every function argument of list type) in time
// quadratic in its length: a 20,000-element literal passed to join() took
// 2 s, a 100,000-element one most of a minute. A jobspec's lists are a few
// dozen elements long; the structs limits on groups, tasks, constraints
// and meta entries are 1024 as well.
const MaxListElements = 1024

// MaxNumberLiteral is the longest number literal, in bytes, and
// MaxNumberExponent the largest decimal exponent one may carry (float64's
// range). hcl/v2 parses number literals to arbitrary-precision floats:
// tostring(1e9999999) spent 18 s and gigabytes rendering ten million
// digits.
const (
	MaxNumberLiteral  = 64
	MaxNumberExponent = 308
)

// frame is one open nesting level of the token stream.
type frame struct {
	open  hclsyntax.TokenType // the token that opened it, or directiveBody
	ops   int                 // operators chained in its current expression
	elems int                 // commas seen at this level (list literals)
}

// directiveBody marks the frame of a %{ if } or %{ for } body.
const directiveBody hclsyntax.TokenType = -1

// CheckNesting lexes the HCL config src (read from filename, used in
// messages) without parsing it, and returns one error diagnostic at the
// first place that nests deeper than MaxNestingDepth or chains more than
// MaxExpressionOperators operators; nil when src is within both. The lexer
// is iterative, so CheckNesting is safe on any input and must run before
// hclsyntax parses src. It reports nothing about other syntax errors,
// which the parser finds.
func CheckNesting(filename string, src []byte) hcl.Diagnostics {
	tokens, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	return checkTokens(tokens)
}

// CheckExpressionNesting is CheckNesting for a lone HCL expression, such
// as a -var value.
func CheckExpressionNesting(filename string, src []byte) hcl.Diagnostics {
	tokens, _ := hclsyntax.LexExpression(src, filename, hcl.InitialPos)
	return checkTokens(tokens)
}

func checkTokens(tokens hclsyntax.Tokens) hcl.Diagnostics {
	// The file body is the bottom frame; it is not counted as a level.
	stack := []frame{{open: hclsyntax.TokenNil}}
	for i, tok := range tokens {
		top := &stack[len(stack)-1]
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			// An opening bracket also extends the expression it follows
			// (a[0][0]... nests one index expression in the next).
			top.ops++
			if d := checkOps(top, tok); d != nil {
				return hcl.Diagnostics{d}
			}
			if tok.Type == hclsyntax.TokenTemplateControl {
				switch directiveKeyword(tokens, i) {
				case "if", "for":
					// The directive's body runs to its %{ endif } or
					// %{ endfor }: one more level.
					stack = append(stack, frame{open: directiveBody})
				case "endif", "endfor":
					if len(stack) > 1 && stack[len(stack)-1].open == directiveBody {
						stack = stack[:len(stack)-1]
					}
				}
			}
			stack = append(stack, frame{open: tok.Type})
			if len(stack)-1 > MaxNestingDepth {
				return hcl.Diagnostics{{
					Severity: hcl.DiagError,
					Summary:  "Nesting too deep",
					Detail: fmt.Sprintf("This nests blocks, objects, lists, parentheses, function calls, strings and templates more than %d levels deep; "+
						"the limit keeps one request from exhausting the agent's stack.", MaxNestingDepth),
					Subject: tok.Range.Ptr(),
				}}
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen,
			hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			// Pop the innermost bracketed frame; a stray closer is the
			// parser's to report.
			for j := len(stack) - 1; j > 0; j-- {
				if stack[j].open != directiveBody {
					stack = stack[:j]
					break
				}
			}
		case hclsyntax.TokenComma, hclsyntax.TokenEqual:
			top.ops = 0
			if tok.Type == hclsyntax.TokenComma && top.open == hclsyntax.TokenOBrack {
				top.elems++
				if top.elems >= MaxListElements {
					return hcl.Diagnostics{{
						Severity: hcl.DiagError,
						Summary:  "List too long",
						Detail: fmt.Sprintf("This list holds more than %d elements; the limit keeps one request from costing the agent minutes of CPU "+
							"(see website/docs/limits.md).", MaxListElements),
						Subject: tok.Range.Ptr(),
					}}
				}
			}
		case hclsyntax.TokenNumberLit:
			if d := checkNumber(tok); d != nil {
				return hcl.Diagnostics{d}
			}
		case hclsyntax.TokenNewline:
			// A newline ends an expression in a body or an object, not
			// inside parentheses or a list.
			if top.open != hclsyntax.TokenOParen && top.open != hclsyntax.TokenOBrack {
				top.ops = 0
			}
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash,
			hclsyntax.TokenPercent, hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual,
			hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq, hclsyntax.TokenGreaterThan,
			hclsyntax.TokenGreaterThanEq, hclsyntax.TokenAnd, hclsyntax.TokenOr, hclsyntax.TokenBang,
			hclsyntax.TokenQuestion, hclsyntax.TokenColon:
			top.ops++
			if d := checkOps(top, tok); d != nil {
				return hcl.Diagnostics{d}
			}
		}
	}
	return nil
}

// checkNumber refuses a number literal longer than MaxNumberLiteral bytes
// or with a decimal exponent past MaxNumberExponent.
func checkNumber(tok hclsyntax.Token) *hcl.Diagnostic {
	lit := string(tok.Bytes)
	bad := len(lit) > MaxNumberLiteral
	if i := strings.IndexAny(lit, "eE"); i >= 0 && !bad {
		exp, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
		bad = err != nil || exp > MaxNumberExponent || exp < -MaxNumberExponent
	}
	if !bad {
		return nil
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Number too large",
		Detail: fmt.Sprintf("Number literals are at most %d characters with an exponent within ±%d (float64's range); "+
			"an exact huge number costs the agent seconds and gigabytes to render.", MaxNumberLiteral, MaxNumberExponent),
		Subject: tok.Range.Ptr(),
	}
}

func checkOps(f *frame, tok hclsyntax.Token) *hcl.Diagnostic {
	if f.ops <= MaxExpressionOperators {
		return nil
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Expression nests too deep",
		Detail: fmt.Sprintf("This expression chains more than %d operators or index brackets, which nest as deep as they are long; "+
			"split it up (locals help).", MaxExpressionOperators),
		Subject: tok.Range.Ptr(),
	}
}

// directiveKeyword returns the keyword after the template control token at
// tokens[i] ("if", "else", "endif", "for", "endfor"), or "".
func directiveKeyword(tokens hclsyntax.Tokens, i int) string {
	for _, t := range tokens[i+1:] {
		switch t.Type {
		case hclsyntax.TokenNewline, hclsyntax.TokenComment:
			continue
		case hclsyntax.TokenIdent:
			return string(t.Bytes)
		}
		return ""
	}
	return ""
}

// MaxJSONDepth is the deepest nesting of arrays and objects jsondecode
// accepts; cty decodes JSON by recursion, so its input is bounded like HCL's.
const MaxJSONDepth = MaxNestingDepth

// boundedJSONDecodeFunc is cty's jsondecode that first refuses JSON nested
// deeper than MaxJSONDepth.
var boundedJSONDecodeFunc = function.New(&function.Spec{
	Description: stdlib.JSONDecodeFunc.Description(),
	Params: []function.Parameter{{
		Name: "str",
		Type: cty.String,
	}},
	Type: func(args []cty.Value) (cty.Type, error) {
		if args[0].IsKnown() && !args[0].IsNull() {
			if d := JSONDepth([]byte(args[0].AsString())); d > MaxJSONDepth {
				return cty.NilType, function.NewArgErrorf(0, "JSON nested %d levels deep; the limit is %d", d, MaxJSONDepth)
			}
		}
		return stdlib.JSONDecodeFunc.ReturnTypeForValues(args)
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return stdlib.JSONDecodeFunc.Call(args)
	},
})

// JSONDepth returns the deepest nesting of arrays and objects in the JSON
// text b (0 for a scalar), skipping strings. It does not validate b.
func JSONDepth(b []byte) int {
	deepest, _ := jsonNesting(b, -1)
	return deepest
}

// JSONTooDeep returns the byte offset in the JSON text b where arrays and
// objects first nest deeper than limit, or -1 when they never do. Strings
// are skipped; b is not otherwise validated. The HTTP API checks request
// bodies with it before decoding them.
func JSONTooDeep(b []byte, limit int) int {
	_, off := jsonNesting(b, limit)
	return off
}

// jsonNesting scans b once: the deepest nesting, and the offset of the
// first bracket deeper than limit (-1 when none, or when limit < 0).
func jsonNesting(b []byte, limit int) (deepest, offset int) {
	depth := 0
	inString, escaped := false, false
	for i, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
			if limit >= 0 && depth > limit {
				return deepest, i
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest, -1
}
