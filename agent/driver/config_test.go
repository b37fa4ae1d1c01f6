package driver

import (
	"strings"
	"testing"
)

func TestDescribeValue(t *testing.T) {
	cases := []struct {
		name string
		v    interface{}
		want string
	}{
		{"null", nil, "nothing (null)"},
		{"string", "yes", `a string "yes"`},
		{"empty string", "", "an empty string"},
		{"long string", strings.Repeat("é", 30), `a string "` + strings.Repeat("é", 20) + `"...`},
		{"bool", false, "a bool false"},
		{"json number", float64(1), "a number 1"},
		{"fraction", 2.5, "a number 2.5"},
		{"msgpack integer", int64(-3), "a number -3"},
		{"unsigned", uint8(7), "a number 7"},
		{"list", []interface{}{1, 2}, "a list of 2 items"},
		{"one item", []string{"a"}, "a list of 1 item"},
		{"empty list", []interface{}{}, "an empty list"},
		{"list of blocks", []map[string]interface{}{{}, {}, {}}, "a list of 3 items"},
		{"map", map[string]interface{}{"a": 1}, "a block or map"},
		{"string map", map[string]string{}, "a block or map"},
		{"other", struct{}{}, "a value of an unsupported kind"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := DescribeValue(tc.v); got != tc.want {
				t.Fatalf("DescribeValue(%#v) = %q, want %q", tc.v, got, tc.want)
			}
		})
	}
}

func TestCheckKeys(t *testing.T) {
	known := []string{"command", "args", "user"}
	cases := []struct {
		name string
		cfg  map[string]interface{}
		want string // "" means no error
	}{
		{"all known", map[string]interface{}{"command": "x", "args": nil}, ""},
		{"empty", nil, ""},
		{"one unknown", map[string]interface{}{"command": "x", "comand": "y"}, `unknown key "comand" (the test driver accepts command, args and user)`},
		{"first in order", map[string]interface{}{"zz": 1, "aa": 2}, `unknown key "aa"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckKeys(tc.cfg, known, "the test driver")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestStringList(t *testing.T) {
	cases := []struct {
		name    string
		cfg     map[string]interface{}
		want    []string
		wantErr string
	}{
		{"missing", map[string]interface{}{}, nil, ""},
		{"null", map[string]interface{}{"args": nil}, nil, ""},
		{"strings", map[string]interface{}{"args": []string{"a", "b"}}, []string{"a", "b"}, ""},
		{"decoded", map[string]interface{}{"args": []interface{}{"-c", "true"}}, []string{"-c", "true"}, ""},
		{"empty list", map[string]interface{}{"args": []interface{}{}}, []string{}, ""},
		{"number element", map[string]interface{}{"args": []interface{}{"a", float64(2)}}, nil, `key "args": element 1 must be a string, got a number 2`},
		{"not a list", map[string]interface{}{"args": "a b"}, nil, `key "args" must be a list of strings, got a string "a b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StringList(tc.cfg, "args")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") || (got == nil) != (tc.want == nil) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
