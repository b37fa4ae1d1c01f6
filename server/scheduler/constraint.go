package scheduler

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// operandValue is one resolved side of a constraint: its text, its typed
// form (numbers with units compare by value) and whether it was found.
type operandValue struct {
	text  string
	attr  *structs.Attribute
	found bool
}

func textValue(s string) operandValue {
	return operandValue{text: s, attr: structs.ParseAttribute(s), found: true}
}

func attrValue(a *structs.Attribute) operandValue {
	if a == nil {
		return operandValue{}
	}
	return operandValue{text: a.Text(), attr: a, found: true}
}

// interpolation returns the key inside "${key}", or ok false for a literal.
func interpolation(target string) (key string, ok bool) {
	t := strings.TrimSpace(target)
	if strings.HasPrefix(t, "${") && strings.HasSuffix(t, "}") {
		return strings.TrimSpace(t[2 : len(t)-1]), true
	}
	return "", false
}

// resolveNode resolves a constraint target against a node. Understood
// interpolations: ${attr.X} (node.Attributes[X]), ${meta.X} and
// ${node.meta.X} (node.Meta[X]), ${node.id} and ${node.unique.id},
// ${node.name} and ${node.unique.name}, ${node.class}, ${node.datacenter}.
// Anything else in ${} is not found; text outside ${} is a literal.
func resolveNode(n *structs.Node, target string) operandValue {
	key, ok := interpolation(target)
	if !ok {
		return textValue(target)
	}
	switch key {
	case "node.id", "node.unique.id":
		return textValue(n.ID)
	case "node.name", "node.unique.name":
		return textValue(n.Name)
	case "node.class":
		return textValue(n.NodeClass)
	case "node.datacenter":
		return textValue(n.Datacenter)
	}
	if k, ok := strings.CutPrefix(key, "attr."); ok {
		if v, found := n.Attributes[k]; found {
			return textValue(v)
		}
		return operandValue{}
	}
	for _, p := range []string{"meta.", "node.meta."} {
		if k, ok := strings.CutPrefix(key, p); ok {
			if v, found := n.Meta[k]; found {
				return textValue(v)
			}
			return operandValue{}
		}
	}
	return operandValue{}
}

// resolveDevice resolves a device constraint target against a device group
// on node n: ${device.attr.X} (the group's typed attribute X, such as
// memory in MiB), ${device.model} and ${device.name} (the model name),
// ${device.vendor}, ${device.type}. Other targets resolve against the node.
func resolveDevice(n *structs.Node, g *structs.DeviceGroup, target string) operandValue {
	key, ok := interpolation(target)
	if !ok {
		return textValue(target)
	}
	switch key {
	case "device.model", "device.name":
		return textValue(g.Name)
	case "device.vendor":
		return textValue(g.Vendor)
	case "device.type":
		return textValue(g.Type)
	}
	if k, ok := strings.CutPrefix(key, "device.attr."); ok {
		return attrValue(g.Attributes[k])
	}
	return resolveNode(n, target)
}

// regexpCache compiles each constraint pattern once per evaluation. A
// pattern that does not compile is remembered as nil and never matches.
type regexpCache map[string]*regexp.Regexp

func (c regexpCache) match(pattern, s string) bool {
	re, seen := c[pattern]
	if !seen {
		var err error
		re, err = regexp.Compile(pattern)
		if err != nil {
			re = nil
		}
		c[pattern] = re
	}
	return re != nil && re.MatchString(s)
}

// checkOperand applies a constraint operator to resolved sides. It follows
// Nomad's scheduler/feasible.go checkConstraint: every operator except !=,
// is_set and is_not_set needs both sides present; != holds when exactly
// one side is missing. Comparisons use structs.Attribute.Compare so units
// and numbers order by value ("81559 MiB" >= "40 GiB"), falling back to
// comparing the text. An unknown operator never holds.
func checkOperand(op string, l, r operandValue, rx regexpCache) bool {
	switch op {
	case "is_set":
		return l.found
	case "is_not_set":
		return !l.found
	case "!=", "not":
		if l.found != r.found {
			return true
		}
		return l.found && !valuesEqual(l, r)
	}
	if !l.found || !r.found {
		return false
	}
	switch op {
	case "=", "==", "is":
		return valuesEqual(l, r)
	case "<", "<=", ">", ">=":
		c, ok := l.attr.Compare(r.attr)
		if !ok {
			c = strings.Compare(l.text, r.text)
		}
		switch op {
		case "<":
			return c < 0
		case "<=":
			return c <= 0
		case ">":
			return c > 0
		default:
			return c >= 0
		}
	case "regexp":
		return rx.match(r.text, l.text)
	case "set_contains":
		return setContains(l.text, r.text)
	case "version":
		return versionMatches(l.text, r.text)
	}
	return false
}

func valuesEqual(l, r operandValue) bool {
	if c, ok := l.attr.Compare(r.attr); ok {
		return c == 0
	}
	return l.text == r.text
}

// setContains reports whether every comma-separated item of want is in the
// comma-separated set have.
func setContains(have, want string) bool {
	set := map[string]bool{}
	for _, s := range strings.Split(have, ",") {
		set[strings.TrimSpace(s)] = true
	}
	for _, s := range strings.Split(want, ",") {
		if !set[strings.TrimSpace(s)] {
			return false
		}
	}
	return true
}

// versionMatches checks a dotted-number version such as "12.4" or "v1.2.3"
// against a comma-separated list of conditions such as ">= 1.2, < 2.0".
// Operators are =, ==, !=, <, <=, >, >= and ~> (pessimistic: "~> 1.2"
// means >= 1.2 and < 2.0, "~> 1.2.3" means >= 1.2.3 and < 1.3); no
// operator means =. Missing trailing parts count as 0 and pre-release or
// build suffixes ("-rc1", "+abc") are ignored. A version or condition that
// is not dotted numbers never matches.
func versionMatches(version, conditions string) bool {
	v, ok := parseVersion(version)
	if !ok {
		return false
	}
	for _, cond := range strings.Split(conditions, ",") {
		cond = strings.TrimSpace(cond)
		op := "="
		for _, o := range []string{">=", "<=", "!=", "~>", "==", ">", "<", "="} {
			if rest, found := strings.CutPrefix(cond, o); found {
				op, cond = o, strings.TrimSpace(rest)
				break
			}
		}
		want, ok := parseVersion(cond)
		if !ok {
			return false
		}
		c := compareVersions(v, want)
		var holds bool
		switch op {
		case "=", "==":
			holds = c == 0
		case "!=":
			holds = c != 0
		case "<":
			holds = c < 0
		case "<=":
			holds = c <= 0
		case ">":
			holds = c > 0
		case ">=":
			holds = c >= 0
		case "~>":
			holds = c >= 0 && compareVersions(v, pessimisticUpper(want)) < 0
		}
		if !holds {
			return false
		}
	}
	return true
}

func parseVersion(s string) ([]int, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return nil, false
	}
	parts := strings.Split(s, ".")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

func compareVersions(a, b []int) int {
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	}
	return 0
}

// pessimisticUpper returns the exclusive upper bound of "~> v": the
// second-to-last part bumped and the last dropped ("1.2" → "2", "1.2.3" →
// "1.3"); for a single part it bumps that part.
func pessimisticUpper(v []int) []int {
	if len(v) == 1 {
		return []int{v[0] + 1}
	}
	up := append([]int(nil), v[:len(v)-1]...)
	up[len(up)-1]++
	return up
}
