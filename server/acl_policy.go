package server

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// maxACLPolicyNesting bounds the bracket nesting of a policy source. A
// policy needs three levels (block, list); anything deeper is refused
// before the HCL parser recurses into it.
const maxACLPolicyNesting = 16

// ParseACLPolicy parses a policy's HCL rules (Nomad's policy language):
//
//	namespace "default" { policy = "read" capabilities = ["alloc-exec"] }
//	namespace "*"       { policy = "deny" }
//	node     { policy = "read" }   // deny | read | write (list = read)
//	agent    { policy = "write" }
//	operator { policy = "read" }
//
// A namespace name may hold '*' wildcards. Errors wrap structs.ErrInvalid
// and name the line: source larger than structs.MaxACLPolicyRulesBytes,
// nesting deeper than 16 brackets, more than structs.MaxACLPolicyRules
// namespace rules, unknown blocks, attributes, levels or capabilities, a
// block given twice, or a namespace block without policy or capabilities.
func ParseACLPolicy(rules string) (*structs.ACLPolicyRules, error) {
	if len(rules) > structs.MaxACLPolicyRulesBytes {
		return nil, fmt.Errorf("%w: Rules: %d bytes, at most %d", structs.ErrInvalid, len(rules), structs.MaxACLPolicyRulesBytes)
	}
	if err := checkNesting(rules); err != nil {
		return nil, err
	}
	f, diags := hclsyntax.ParseConfig([]byte(rules), "policy.hcl", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return nil, policyDiagError(diags)
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return nil, fmt.Errorf("%w: Rules: not HCL native syntax", structs.ErrInvalid)
	}
	for name, attr := range body.Attributes {
		return nil, policyError(attr.SrcRange, "unexpected attribute %q at the top level; want namespace, node, agent or operator blocks", name)
	}
	out := &structs.ACLPolicyRules{}
	seenNS := map[string]bool{}
	seen := map[string]bool{}
	for _, b := range body.Blocks {
		switch b.Type {
		case "namespace":
			if len(b.Labels) != 1 {
				return nil, policyError(b.TypeRange, "namespace block needs one label, the namespace name (\"*\" for all)")
			}
			name := b.Labels[0]
			if err := validNamespacePattern(name); err != nil {
				return nil, policyError(b.LabelRanges[0], "%v", err)
			}
			if seenNS[name] {
				return nil, policyError(b.TypeRange, "namespace %q given twice", name)
			}
			seenNS[name] = true
			if len(out.Namespaces) >= structs.MaxACLPolicyRules {
				return nil, policyError(b.TypeRange, "more than %d namespace rules", structs.MaxACLPolicyRules)
			}
			rule, err := parseNamespaceBlock(name, b)
			if err != nil {
				return nil, err
			}
			out.Namespaces = append(out.Namespaces, rule)
		case "node", "agent", "operator":
			if len(b.Labels) != 0 {
				return nil, policyError(b.TypeRange, "%s block takes no label", b.Type)
			}
			if seen[b.Type] {
				return nil, policyError(b.TypeRange, "%s block given twice", b.Type)
			}
			seen[b.Type] = true
			level, err := parseLevelBlock(b)
			if err != nil {
				return nil, err
			}
			switch b.Type {
			case "node":
				out.Node = level
			case "agent":
				out.Agent = level
			default:
				out.Operator = level
			}
		default:
			return nil, policyError(b.TypeRange, "unknown block %q; want namespace, node, agent or operator", b.Type)
		}
	}
	sort.Slice(out.Namespaces, func(i, j int) bool { return out.Namespaces[i].Name < out.Namespaces[j].Name })
	return out, nil
}

// checkNesting refuses source whose brackets nest deeper than
// maxACLPolicyNesting, counting every bracket (also inside strings, which
// only makes it stricter).
func checkNesting(src string) error {
	depth, line := 0, 1
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '\n':
			line++
		case '{', '[', '(':
			depth++
			if depth > maxACLPolicyNesting {
				return fmt.Errorf("%w: Rules: line %d: nesting deeper than %d", structs.ErrInvalid, line, maxACLPolicyNesting)
			}
		case '}', ']', ')':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}

func validNamespacePattern(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("namespace name must be 1 to 128 characters")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '*') {
			return fmt.Errorf("namespace %q: only letters, digits, '-', '_' and '*' are allowed", name)
		}
	}
	return nil
}

func parseNamespaceBlock(name string, b *hclsyntax.Block) (*structs.ACLNamespaceRule, error) {
	rule := &structs.ACLNamespaceRule{Name: name}
	for _, nb := range b.Body.Blocks {
		return nil, policyError(nb.TypeRange, "namespace %q: unsupported block %q", name, nb.Type)
	}
	for an, attr := range b.Body.Attributes {
		switch an {
		case "policy":
			s, err := stringAttr(attr)
			if err != nil {
				return nil, err
			}
			if structs.NamespacePolicyCapabilities(s) == nil {
				return nil, policyError(attr.Expr.Range(), "namespace %q: policy %q: want deny, read, write or scale", name, s)
			}
			rule.Policy = s
		case "capabilities":
			v, diags := attr.Expr.Value(nil)
			if diags.HasErrors() {
				return nil, policyDiagError(diags)
			}
			if !v.Type().IsTupleType() && !v.Type().IsListType() {
				return nil, policyError(attr.Expr.Range(), "namespace %q: capabilities must be a list of strings", name)
			}
			if v.LengthInt() > 64 {
				return nil, policyError(attr.Expr.Range(), "namespace %q: more than 64 capabilities", name)
			}
			for it := v.ElementIterator(); it.Next(); {
				_, ev := it.Element()
				if ev.IsNull() || !ev.IsKnown() || ev.Type() != cty.String {
					return nil, policyError(attr.Expr.Range(), "namespace %q: capabilities must be a list of strings", name)
				}
				c := ev.AsString()
				if !structs.ValidNamespaceCapability(c) {
					return nil, policyError(attr.Expr.Range(), "namespace %q: unknown capability %q", name, c)
				}
				rule.Capabilities = append(rule.Capabilities, c)
			}
		default:
			return nil, policyError(attr.SrcRange, "namespace %q: unknown attribute %q; want policy or capabilities", name, an)
		}
	}
	if rule.Policy == "" && len(rule.Capabilities) == 0 {
		return nil, policyError(b.TypeRange, "namespace %q: needs policy or capabilities", name)
	}
	return rule, nil
}

func parseLevelBlock(b *hclsyntax.Block) (string, error) {
	for _, nb := range b.Body.Blocks {
		return "", policyError(nb.TypeRange, "%s: unsupported block %q", b.Type, nb.Type)
	}
	level := ""
	for an, attr := range b.Body.Attributes {
		if an != "policy" {
			return "", policyError(attr.SrcRange, "%s: unknown attribute %q; want policy", b.Type, an)
		}
		s, err := stringAttr(attr)
		if err != nil {
			return "", err
		}
		switch s {
		case structs.PolicyDeny, structs.PolicyRead, structs.PolicyWrite:
		case structs.PolicyList:
			s = structs.PolicyRead
		default:
			return "", policyError(attr.Expr.Range(), "%s: policy %q: want deny, read or write", b.Type, s)
		}
		level = s
	}
	if level == "" {
		return "", policyError(b.TypeRange, "%s: policy is required", b.Type)
	}
	return level, nil
}

func stringAttr(attr *hclsyntax.Attribute) (string, error) {
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		return "", policyDiagError(diags)
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", policyError(attr.Expr.Range(), "%s must be a string", attr.Name)
	}
	return v.AsString(), nil
}

func policyError(r hcl.Range, format string, args ...interface{}) error {
	return fmt.Errorf("%w: Rules: line %d, column %d: %s", structs.ErrInvalid, r.Start.Line, r.Start.Column, fmt.Sprintf(format, args...))
}

func policyDiagError(diags hcl.Diagnostics) error {
	var lines []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		if d.Subject != nil {
			msg = fmt.Sprintf("line %d, column %d: %s", d.Subject.Start.Line, d.Subject.Start.Column, msg)
		}
		lines = append(lines, msg)
	}
	return fmt.Errorf("%w: Rules: %s", structs.ErrInvalid, strings.Join(lines, "; "))
}
