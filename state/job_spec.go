package state

import (
	"reflect"

	"github.com/gpulayer/gpulayer/structs"
)

// JobSpecChanged reports whether b's spec differs from a's: everything but
// status, version, stability, submit time and Raft indexes (what makes a
// register a new version).
func JobSpecChanged(a, b *structs.Job) bool { return jobSpecChanged(a, b) }

// jobSpecChanged reports whether b's spec differs from a's. Status,
// StatusDescription, Version, Stable, SubmitTime and the three indexes are ignored;
// everything else, Stop included, is compared. A nil slice or map equals an
// empty one, and numbers inside interfaces (task Config) compare by value,
// so a job that went through Copy or msgpack compares equal to its source.
func jobSpecChanged(a, b *structs.Job) bool {
	x, y := *a, *b
	for _, j := range []*structs.Job{&x, &y} {
		j.Status, j.StatusDescription = "", ""
		j.Version, j.SubmitTime, j.Stable = 0, 0, false
		j.CreateIndex, j.ModifyIndex, j.JobModifyIndex = 0, 0, 0
	}
	return !looseEqual(reflect.ValueOf(x), reflect.ValueOf(y), 0)
}

// maxEqualDepth bounds looseEqual's recursion; jobs are far shallower.
const maxEqualDepth = 64

// looseEqual is reflect.DeepEqual except that nil and empty slices and maps
// are equal and numbers held in interfaces compare by value. Values deeper
// than maxEqualDepth compare unequal.
func looseEqual(a, b reflect.Value, depth int) bool {
	if depth > maxEqualDepth {
		return false
	}
	if !a.IsValid() || !b.IsValid() {
		return a.IsValid() == b.IsValid()
	}
	if a.Type() != b.Type() {
		if fa, ok := number(a); ok {
			if fb, ok := number(b); ok {
				return fa == fb
			}
		}
		return false
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return looseEqual(a.Elem(), b.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := 0; i < a.Len(); i++ {
			if !looseEqual(a.Index(i), b.Index(i), depth+1) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		it := a.MapRange()
		for it.Next() {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !looseEqual(it.Value(), bv, depth+1) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !looseEqual(a.Field(i), b.Field(i), depth+1) {
				return false
			}
		}
		return true
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.String:
		return a.String() == b.String()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	case reflect.Complex64, reflect.Complex128:
		return a.Complex() == b.Complex()
	default:
		// Funcs, channels and unsafe pointers never appear in a job.
		return false
	}
}

// number returns v as a float64 when it is a signed, unsigned or float
// number.
func number(v reflect.Value) (float64, bool) {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(v.Uint()), true
	case reflect.Float32, reflect.Float64:
		return v.Float(), true
	}
	return 0, false
}
