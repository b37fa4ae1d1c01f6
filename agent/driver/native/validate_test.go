package native

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// goTypeNames are Go type names that must never reach a user's error
// message.
var goTypeNames = []string{"float64", "float32", "int64", "interface {}", "interface{}", "map[string]", "[]string", "<nil>", "%!"}

func TestValidateConfig(t *testing.T) {
	cpu := &structs.Resources{CPU: 500, MemoryMB: 64}
	cases := []struct {
		name string
		cfg  map[string]interface{}
		res  *structs.Resources
		want string // "" means accepted
	}{
		{"command only", map[string]interface{}{"command": "/bin/true"}, cpu, ""},
		{"everything", map[string]interface{}{"command": "sh", "args": []interface{}{"-c", "echo hi"}, "user": "nobody", "cpu_hard_limit": true}, cpu, ""},
		{"args as strings", map[string]interface{}{"command": "sh", "args": []string{"-c", "true"}}, nil, ""},
		{"null args", map[string]interface{}{"command": "sh", "args": nil}, nil, ""},
		{"cpu_hard_limit false without cpu", map[string]interface{}{"command": "sh", "cpu_hard_limit": false}, &structs.Resources{MemoryMB: 32}, ""},
		{"command missing from the client is not checked", map[string]interface{}{"command": "/no/such/binary"}, nil, ""},
		{"unknown key", map[string]interface{}{"command": "x", "comand": "x"}, cpu, `unknown key "comand" (the native driver accepts command, args, user and cpu_hard_limit)`},
		{"no command", map[string]interface{}{"args": []interface{}{"x"}}, cpu, `key "command" is required`},
		{"empty command", map[string]interface{}{"command": "  "}, cpu, `key "command" must be a non-empty string, got a string "  "`},
		{"command a number", map[string]interface{}{"command": float64(7)}, cpu, `key "command" must be a non-empty string, got a number 7`},
		{"command a list", map[string]interface{}{"command": []interface{}{"sh"}}, cpu, `key "command" must be a non-empty string, got a list of 1 item`},
		{"user a bool", map[string]interface{}{"command": "sh", "user": true}, cpu, `key "user" must be a non-empty string, got a bool true`},
		{"cpu_hard_limit a string", map[string]interface{}{"command": "sh", "cpu_hard_limit": "yes"}, cpu, `key "cpu_hard_limit" must be true or false, got a string "yes"`},
		{"cpu_hard_limit a number", map[string]interface{}{"command": "sh", "cpu_hard_limit": float64(1)}, cpu, `key "cpu_hard_limit" must be true or false, got a number 1`},
		{"args numbers", map[string]interface{}{"command": "sh", "args": []interface{}{float64(1), float64(2)}}, cpu, `key "args": element 0 must be a string, got a number 1`},
		{"args a string", map[string]interface{}{"command": "sh", "args": "-c true"}, cpu, `key "args" must be a list of strings, got a string "-c true"`},
		{"args a map", map[string]interface{}{"command": "sh", "args": map[string]interface{}{"a": "b"}}, cpu, `key "args" must be a list of strings, got a block or map`},
		{"cpu_hard_limit without resources", map[string]interface{}{"command": "sh", "cpu_hard_limit": true}, nil, `key "cpu_hard_limit" is true but the task's resources set no cpu (got 0 MHz)`},
		{"cpu_hard_limit with cpu 0", map[string]interface{}{"command": "sh", "cpu_hard_limit": true}, &structs.Resources{MemoryMB: 32}, `set resources { cpu = <MHz> } or remove cpu_hard_limit`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateConfig(tc.cfg, tc.res)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			if errors.Is(err, driver.ErrInvalidConfig) || strings.HasPrefix(err.Error(), "invalid") {
				t.Fatalf("validator error %q carries the client's prefix", err)
			}
			for _, n := range goTypeNames {
				if strings.Contains(err.Error(), n) {
					t.Fatalf("error %q names the Go type %q", err, n)
				}
			}
		})
	}
}

// TestValidatorRegistered checks that importing the package registers
// ValidateConfig under "native", so servers check native configs, and
// that a second registration of the name panics.
func TestValidatorRegistered(t *testing.T) {
	err := structs.ValidateDriverConfig(Name, map[string]interface{}{"command": "sh", "cpu_hard_limit": "yes"}, nil)
	var dce *structs.DriverConfigError
	if !errors.As(err, &dce) || dce.Driver != Name || !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("ValidateDriverConfig = %v, want a *DriverConfigError for %q matching ErrInvalid", err, Name)
	}
	if err := structs.ValidateDriverConfig(Name, map[string]interface{}{"command": "sh"}, nil); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering the native validator twice did not panic")
		}
	}()
	structs.RegisterDriverConfigValidator(Name, ValidateConfig)
}

// FuzzValidateNativeConfig decodes a JSON object as the HTTP API does and
// checks that the server's validator and the client's parser agree (the
// server never refuses a config the client would run, nor accepts one
// the client refuses for its shape), that neither panics and that no
// message names a Go type.
func FuzzValidateNativeConfig(f *testing.F) {
	for _, s := range []string{
		`{"command":"/bin/sh","args":["-c","echo hi"]}`,
		`{"command":"sh","cpu_hard_limit":"yes"}`,
		`{"command":"sh","args":[1,2],"user":"nobody"}`,
		`{"comand":"x"}`,
		`{"command":{"a":[null]},"cpu_hard_limit":true}`,
		`{"command":"x","args":null,"user":""}`,
	} {
		f.Add([]byte(s), 0)
		f.Add([]byte(s), 500)
	}
	f.Fuzz(func(t *testing.T, data []byte, cpu int) {
		var m map[string]interface{}
		if json.Unmarshal(data, &m) != nil {
			return
		}
		res := &structs.Resources{CPU: cpu}
		verr := ValidateConfig(m, res)
		tc, perr := parseConfig(m)
		if (perr == nil) != (tc != nil) {
			t.Fatalf("parseConfig returned %v and %v", tc, perr)
		}
		if perr != nil {
			if !errors.Is(perr, driver.ErrInvalidConfig) || !errors.Is(perr, structs.ErrInvalid) {
				t.Fatalf("parseConfig error %v does not wrap ErrInvalidConfig", perr)
			}
			if verr == nil {
				t.Fatalf("the client refuses %s (%v) but the server accepts it", data, perr)
			}
		} else if wantHard := tc.CPUHardLimit && cpu <= 0; (verr != nil) != wantHard {
			t.Fatalf("config %s with cpu %d: validator says %v", data, cpu, verr)
		}
		for _, err := range []error{verr, perr} {
			if err == nil {
				continue
			}
			if !strings.Contains(err.Error(), "key ") {
				t.Fatalf("error %q names no key", err)
			}
			for _, n := range goTypeNames {
				if strings.Contains(err.Error(), n) && !mentions(m, n) {
					t.Fatalf("error %q names the Go type %q", err, n)
				}
			}
		}
	})
}

// mentions reports whether a key or string value anywhere in v contains
// s, so that a message quoting the user's own text is not taken for a
// leaked Go type name.
func mentions(v interface{}, s string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, s)
	case []interface{}:
		for _, e := range x {
			if mentions(e, s) {
				return true
			}
		}
	case map[string]interface{}:
		for k, e := range x {
			if strings.Contains(k, s) || mentions(e, s) {
				return true
			}
		}
	}
	return false
}
