package structs

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Attribute is a typed, optionally unit-carrying value such as a device's
// memory (Int 81559, Unit "MiB") or compute capability (String "9.0").
// Exactly one of Int, Float, String, Bool is set. The shape follows Nomad's
// plugins/shared/structs.Attribute.
type Attribute struct {
	Int    *int64   `json:",omitempty"`
	Float  *float64 `json:",omitempty"`
	String *string  `json:",omitempty"`
	Bool   *bool    `json:",omitempty"`
	Unit   string   `json:",omitempty"`
}

// Units understood by ParseAttribute and Compare, with their size in the
// base unit of their dimension (bytes for byte units, Hz for frequency).
// Binary prefixes are powers of 1024, decimal ones powers of 1000.
var attributeUnits = map[string]struct {
	dim  string
	mult float64
}{
	"B": {"bytes", 1}, "KB": {"bytes", 1e3}, "MB": {"bytes", 1e6}, "GB": {"bytes", 1e9}, "TB": {"bytes", 1e12},
	"KiB": {"bytes", 1 << 10}, "MiB": {"bytes", 1 << 20}, "GiB": {"bytes", 1 << 30}, "TiB": {"bytes", 1 << 40},
	"Hz": {"hz", 1}, "KHz": {"hz", 1e3}, "MHz": {"hz", 1e6}, "GHz": {"hz", 1e9},
	"W": {"watts", 1}, "mW": {"watts", 1e-3},
}

// NewIntAttribute returns an integer attribute with a unit ("" for none).
func NewIntAttribute(v int64, unit string) *Attribute { return &Attribute{Int: &v, Unit: unit} }

// NewStringAttribute returns a string attribute.
func NewStringAttribute(s string) *Attribute { return &Attribute{String: &s} }

// NewBoolAttribute returns a boolean attribute.
func NewBoolAttribute(b bool) *Attribute { return &Attribute{Bool: &b} }

// NewFloatAttribute returns a float attribute with a unit ("" for none).
func NewFloatAttribute(f float64, unit string) *Attribute { return &Attribute{Float: &f, Unit: unit} }

// ParseAttribute reads a constraint value such as "40 GiB", "40GiB", "1.5",
// "true", "9.0" or "H100". A number followed by a known unit becomes a
// number with that unit; "true"/"false" become booleans; anything else is a
// string. It never fails.
func ParseAttribute(s string) *Attribute {
	s = strings.TrimSpace(s)
	if s == "true" || s == "false" {
		return NewBoolAttribute(s == "true")
	}
	num, unit := s, ""
	if i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '-' && r != '+' }); i > 0 {
		cand := strings.TrimSpace(s[i:])
		if _, ok := attributeUnits[cand]; ok {
			num, unit = strings.TrimSpace(s[:i]), cand
		}
	}
	if i, err := strconv.ParseInt(num, 10, 64); err == nil {
		return NewIntAttribute(i, unit)
	}
	if f, err := strconv.ParseFloat(num, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
		// A version-like string such as "9.0" parses as a float: keep both
		// usable by leaving it a float; Compare handles float vs string.
		return NewFloatAttribute(f, unit)
	}
	return NewStringAttribute(s)
}

// Text renders the value with its unit, e.g. "81559 MiB".
func (a *Attribute) Text() string {
	if a == nil {
		return "<nil>"
	}
	var v string
	switch {
	case a.Int != nil:
		v = strconv.FormatInt(*a.Int, 10)
	case a.Float != nil:
		v = strconv.FormatFloat(*a.Float, 'f', -1, 64)
	case a.String != nil:
		return *a.String
	case a.Bool != nil:
		return strconv.FormatBool(*a.Bool)
	}
	if a.Unit != "" {
		v += " " + a.Unit
	}
	return v
}

// Copy returns a deep copy.
func (a *Attribute) Copy() *Attribute {
	if a == nil {
		return nil
	}
	n := &Attribute{Unit: a.Unit}
	if a.Int != nil {
		v := *a.Int
		n.Int = &v
	}
	if a.Float != nil {
		v := *a.Float
		n.Float = &v
	}
	if a.String != nil {
		v := *a.String
		n.String = &v
	}
	if a.Bool != nil {
		v := *a.Bool
		n.Bool = &v
	}
	return n
}

func (a *Attribute) numeric() (float64, bool) {
	var f float64
	switch {
	case a.Int != nil:
		f = float64(*a.Int)
	case a.Float != nil:
		f = *a.Float
	default:
		return 0, false
	}
	if u, ok := attributeUnits[a.Unit]; ok {
		f *= u.mult
	}
	return f, true
}

// Compare orders a against b: -1, 0 or 1. Numbers compare by value after
// converting units of the same dimension (so 81559 MiB > 40 GiB); a number
// without a unit compared with one that has a unit takes the other's unit.
// Strings compare lexically, booleans only for equality. ok is false when
// the two cannot be compared (a string against a number, units of
// different dimensions, a nil side).
func (a *Attribute) Compare(b *Attribute) (cmp int, ok bool) {
	if a == nil || b == nil {
		return 0, false
	}
	if a.Bool != nil || b.Bool != nil {
		if a.Bool == nil || b.Bool == nil {
			return 0, false
		}
		if *a.Bool == *b.Bool {
			return 0, true
		}
		return 1, true
	}
	if a.String != nil || b.String != nil {
		// A number against a string compares by text, so "9.0" (string)
		// and 9.0 (float) meet.
		return strings.Compare(a.Text(), b.Text()), true
	}
	ua, aok := attributeUnits[a.Unit]
	ub, bok := attributeUnits[b.Unit]
	if aok && bok && ua.dim != ub.dim {
		return 0, false
	}
	x, _ := a.numeric()
	y, _ := b.numeric()
	// A bare number takes the other side's unit.
	if !aok && bok {
		x *= ub.mult
	}
	if aok && !bok {
		y *= ua.mult
	}
	switch {
	case x < y:
		return -1, true
	case x > y:
		return 1, true
	}
	return 0, true
}

// ErrAttributeCompare describes an impossible comparison in constraint
// evaluation.
func ErrAttributeCompare(a, b *Attribute) error {
	return fmt.Errorf("cannot compare %q with %q", a.Text(), b.Text())
}
