package driver

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDescribedString is how many bytes of a string value DescribeValue
// quotes before it cuts the rest off with "...".
const maxDescribedString = 40

// DescribeValue names a config value for an error message in the words
// of the jobspec, never Go's type names: `a string "yes"`, `a number 1`,
// `a bool true`, `a list of 2 items`, `a block or map`, `nothing (null)`.
// It understands the shapes a config takes after JSON, msgpack or HCL
// decoding: strings, bools, every Go integer and float kind, lists of
// interfaces, strings or maps, and maps keyed by strings. Long strings are
// cut to 40 bytes.
func DescribeValue(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "nothing (null)"
	case string:
		if x == "" {
			return "an empty string"
		}
		if len(x) > maxDescribedString {
			cut := maxDescribedString
			for cut > 0 && !utf8.RuneStart(x[cut]) {
				cut--
			}
			return "a string " + strconv.Quote(x[:cut]) + "..."
		}
		return "a string " + strconv.Quote(x)
	case bool:
		return "a bool " + strconv.FormatBool(x)
	case float64:
		return "a number " + strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return "a number " + strconv.FormatFloat(float64(x), 'g', -1, 32)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprintf("a number %d", x)
	case []interface{}:
		return listOf(len(x))
	case []string:
		return listOf(len(x))
	case []map[string]interface{}:
		return listOf(len(x))
	case map[string]interface{}, map[string]string, map[interface{}]interface{}:
		return "a block or map"
	}
	return "a value of an unsupported kind"
}

func listOf(n int) string {
	switch n {
	case 0:
		return "an empty list"
	case 1:
		return "a list of 1 item"
	}
	return fmt.Sprintf("a list of %d items", n)
}

// CheckKeys returns an error naming the first key of cfg (in sorted order)
// that is not in known, with the keys owner ("the native driver", "a
// mount") accepts, e.g. `unknown key "comand" (the native driver accepts
// command, args, user and cpu_hard_limit)`, or nil. The error does not wrap ErrInvalidConfig: a
// driver's submit-time validator returns it as is and its StartTask wraps it.
func CheckKeys(cfg map[string]interface{}, known []string, owner string) error {
	var unknown []string
	for k := range cfg {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("unknown key %q (%s accepts %s)", unknown[0], owner, wordList(known))
}

// StringList reads cfg[key] as a list of strings. A missing or null key
// returns nil, nil. It returns an error naming the key, and the element by
// its position, when the value is not a list or an element is not a
// string, e.g. `key "args": element 0 must be a string, got a number 1`.
func StringList(cfg map[string]interface{}, key string) ([]string, error) {
	raw, ok := cfg[key]
	if !ok || raw == nil {
		return nil, nil
	}
	switch v := raw.(type) {
	case []string:
		return append([]string(nil), v...), nil
	case []interface{}:
		out := make([]string, 0, len(v))
		for i, a := range v {
			s, ok := a.(string)
			if !ok {
				return nil, fmt.Errorf("key %q: element %d must be a string, got %s", key, i, DescribeValue(a))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("key %q must be a list of strings, got %s", key, DescribeValue(raw))
}

// wordList joins words as "a, b and c".
func wordList(words []string) string {
	switch len(words) {
	case 0:
		return "nothing"
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
