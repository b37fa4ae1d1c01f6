package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// FieldError is the error of CheckFields for a field GPUlayer does not
// support that carries a value: Path is where ("Job.TaskGroups[0].
// Networks"), Reason why (UnsupportedFields).
type FieldError struct {
	Path   string
	Reason string
}

// Error renders "Job.Periodic: not supported by GPUlayer: periodic jobs
// are not supported yet (issue 13)".
func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: not supported by GPUlayer: %s", e.Path, e.Reason)
}

// CheckFields walks the JSON document raw against the wire type of v (a
// pointer to a struct of this package, such as *JobRegisterRequest) and
// reports the keys the type has no field for: the first one listed Refuse
// in UnsupportedFields that has a non-zero value is returned as a
// *FieldError; Warn entries and unknown keys with a non-zero value become
// warnings ("Job.TaskGroups[0].Foo: unknown field, ignored"). root, when
// not empty, is put in front of every path. raw must already be
// valid JSON (decode it into v first); a document that is not gives an
// error. Keys are matched without regard to case, as encoding/json does;
// driver Config and other free-form maps are not walked.
func CheckFields(raw []byte, v interface{}, root string) (warnings []string, err error) {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	c := &checker{}
	if err := c.walk(json.RawMessage(raw), t, root); err != nil {
		return nil, err
	}
	if c.dropped > 0 {
		c.warnings = append(c.warnings, fmt.Sprintf("... and %d more fields ignored", c.dropped))
	}
	return c.warnings, nil
}

// MaxFieldWarnings caps the warnings CheckFields returns; past it they are
// counted in one last warning. A request body of 1 MiB could otherwise
// name 100,000 unknown fields, each warned with its full path: an answer
// ten times the request.
const MaxFieldWarnings = 50

// maxWarnKey caps how much of an unknown key a warning quotes, in bytes.
const maxWarnKey = 64

type checker struct {
	warnings []string
	dropped  int
}

// warn records a warning, or counts it past MaxFieldWarnings.
func (c *checker) warn(w string) {
	if len(c.warnings) >= MaxFieldWarnings {
		c.dropped++
		return
	}
	c.warnings = append(c.warnings, w)
}

// wirePkg is this package's import path: only its structs are walked.
var wirePkg = reflect.TypeOf(Job{}).PkgPath()

func (c *checker) walk(raw json.RawMessage, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if raw[0] != '{' || t.PkgPath() != wirePkg {
			// A leaf of another package (time.Time) or a value that is
			// not an object: decoding already judged it.
			return nil
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fields := jsonFields(t)
		for _, key := range sortedKeys(obj) {
			val := obj[key]
			if f, ok := fields[strings.ToLower(key)]; ok {
				if err := c.walk(val, f.Type, join(path, f.Name)); err != nil {
					return err
				}
				continue
			}
			if isZeroJSON(val) {
				continue
			}
			shown := key
			if len(shown) > maxWarnKey {
				shown = shown[:maxWarnKey] + "..."
			}
			where := join(path, shown)
			u, listed := lookupUnsupported(t.Name(), key)
			switch {
			case !listed:
				c.warn(where + ": unknown field, ignored")
			case u.Kind == Refuse:
				return &FieldError{Path: where, Reason: u.Reason}
			case u.Kind == Warn:
				c.warn(where + ": " + u.Reason)
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 || raw[0] != '[' {
			return nil // []byte is base64 text
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for i, it := range items {
			if err := c.walk(it, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if raw[0] != '{' {
			return nil
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, k := range sortedKeys(obj) {
			if err := c.walk(obj[k], t.Elem(), fmt.Sprintf("%s[%q]", path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// isZeroJSON reports whether raw is what a client sends for a value left
// out: null, false, 0, "", an empty array, or an object whose values are
// all zero.
func isZeroJSON(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return true
	}
	switch raw[0] {
	case 'n', 'f':
		return true
	case '"':
		return string(raw) == `""`
	case '[':
		var items []json.RawMessage
		return json.Unmarshal(raw, &items) == nil && len(items) == 0
	case '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return false
		}
		for _, v := range obj {
			if !isZeroJSON(v) {
				return false
			}
		}
		return true
	case 't':
		return false
	default:
		var f float64
		return json.Unmarshal(raw, &f) == nil && f == 0
	}
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// A stable order makes the first error and the warnings repeatable.
	slices.Sort(keys)
	return keys
}

var (
	fieldsMu    sync.Mutex
	fieldsCache = map[reflect.Type]map[string]reflect.StructField{}
)

// jsonFields maps the lower-cased JSON name of each field of t that
// encoding/json decodes to the field; embedded structs contribute their
// fields.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	fieldsMu.Lock()
	defer fieldsMu.Unlock()
	if m, ok := fieldsCache[t]; ok {
		return m
	}
	m := map[string]reflect.StructField{}
	addFields(t, m)
	fieldsCache[t] = m
	return m
}

func addFields(t reflect.Type, m map[string]reflect.StructField) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			addFields(f.Type, m)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[strings.ToLower(name)] = f
	}
}

// lookupUnsupported finds the UnsupportedFields entry of owner.key.
func lookupUnsupported(owner, key string) (UnsupportedField, bool) {
	for _, u := range UnsupportedFields {
		if u.Owner == owner && strings.EqualFold(u.Field, key) {
			return u, true
		}
	}
	return UnsupportedField{}, false
}
