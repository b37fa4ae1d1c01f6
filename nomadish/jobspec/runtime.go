package jobspec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// parseTimeRoots are the variable roots the parser evaluates. Every other
// root inside a "${...}" interpolation (attr, node, meta, device, env,
// unique, NOMAD_ALLOC_ID, GPULAYER_..., and names the parser does not know)
// is a runtime interpolation: the scheduler or the client evaluates it later,
// so the parser keeps its text.
var parseTimeRoots = map[string]bool{"var": true, "local": true}

// runtimeKeeper is an hclsyntax.Walker that rewrites, in place, every
// template interpolation that refers to a runtime root into a literal string
// holding its source text, "${" + expression + "}". After the walk the whole
// file evaluates with only var, local and the functions in scope.
type runtimeKeeper struct {
	src []byte
	// scopes holds the names bound by the enclosing for expressions, which
	// are evaluation-time variables, not runtime roots.
	scopes []map[string]bool
}

// keepRuntimeInterpolations runs a runtimeKeeper over body. src must be the
// bytes body was parsed from.
func keepRuntimeInterpolations(body *hclsyntax.Body, src []byte) hcl.Diagnostics {
	return hclsyntax.Walk(body, &runtimeKeeper{src: src})
}

// Enter implements hclsyntax.Walker.
func (k *runtimeKeeper) Enter(node hclsyntax.Node) hcl.Diagnostics {
	var diags hcl.Diagnostics
	switch e := node.(type) {
	case *hclsyntax.ForExpr:
		scope := map[string]bool{e.ValVar: true}
		if e.KeyVar != "" {
			scope[e.KeyVar] = true
		}
		k.scopes = append(k.scopes, scope)
	case *hclsyntax.TemplateExpr:
		for i, part := range e.Parts {
			if !k.isRuntime(part) {
				continue
			}
			lit, diag := k.literal(part)
			if diag != nil {
				diags = append(diags, diag)
				continue
			}
			e.Parts[i] = lit
		}
	case *hclsyntax.TemplateWrapExpr:
		if k.isRuntime(e.Wrapped) {
			lit, diag := k.literal(e.Wrapped)
			if diag != nil {
				return hcl.Diagnostics{diag}
			}
			e.Wrapped = lit
		}
	}
	return diags
}

// Exit implements hclsyntax.Walker.
func (k *runtimeKeeper) Exit(node hclsyntax.Node) hcl.Diagnostics {
	if _, ok := node.(*hclsyntax.ForExpr); ok && len(k.scopes) > 0 {
		k.scopes = k.scopes[:len(k.scopes)-1]
	}
	return nil
}

// isRuntime reports whether expr refers to at least one runtime root.
func (k *runtimeKeeper) isRuntime(expr hclsyntax.Expression) bool {
	for _, trav := range expr.Variables() {
		root := trav.RootName()
		if parseTimeRoots[root] || k.inScope(root) {
			continue
		}
		return true
	}
	return false
}

func (k *runtimeKeeper) inScope(name string) bool {
	for _, s := range k.scopes {
		if s[name] {
			return true
		}
	}
	return false
}

// literal returns a literal expression holding "${" + the source text of
// expr + "}". It fails when expr is not the whole of a "${...}"
// interpolation, for example a runtime reference inside a %{if} directive,
// which the parser cannot keep for later.
func (k *runtimeKeeper) literal(expr hclsyntax.Expression) (hclsyntax.Expression, *hcl.Diagnostic) {
	rng := expr.Range()
	start, end := rng.Start.Byte, rng.End.Byte
	if start < 0 || end > len(k.src) || start > end || !k.interpolationAround(start, end) {
		return nil, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsupported runtime reference",
			Detail: fmt.Sprintf("%s is evaluated when the job runs, so it can only appear alone inside a \"${...}\" interpolation, not in a function call, operator or template directive here.",
				rootsOf(expr)),
			Subject: rng.Ptr(),
		}
	}
	return &hclsyntax.LiteralValueExpr{
		Val:      cty.StringVal("${" + string(k.src[start:end]) + "}"),
		SrcRange: rng,
	}, nil
}

// interpolationAround reports whether src[start:end] is enclosed by "${"
// and "}", allowing spaces and the "~" strip markers in between.
func (k *runtimeKeeper) interpolationAround(start, end int) bool {
	i := start
	for i > 0 && isTemplateSpace(k.src[i-1]) {
		i--
	}
	if i > 0 && k.src[i-1] == '~' {
		i--
	}
	if i < 2 || k.src[i-2] != '$' || k.src[i-1] != '{' {
		return false
	}
	j := end
	for j < len(k.src) && isTemplateSpace(k.src[j]) {
		j++
	}
	if j < len(k.src) && k.src[j] == '~' {
		j++
	}
	return j < len(k.src) && k.src[j] == '}'
}

func isTemplateSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// rootsOf names the first runtime-looking root of expr for a message.
func rootsOf(expr hclsyntax.Expression) string {
	for _, trav := range expr.Variables() {
		if !parseTimeRoots[trav.RootName()] {
			return fmt.Sprintf("%q", trav.RootName())
		}
	}
	return "the reference"
}
