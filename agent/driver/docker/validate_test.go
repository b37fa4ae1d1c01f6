package docker

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
	mount := func(m map[string]interface{}) map[string]interface{} {
		return map[string]interface{}{"image": "x", "mounts": []interface{}{m}}
	}
	cases := []struct {
		name string
		cfg  map[string]interface{}
		want string // "" means accepted
	}{
		{"image only", map[string]interface{}{"image": "alpine:3"}, ""},
		{"everything", map[string]interface{}{"image": "app:1", "command": "/app/serve", "args": []interface{}{"--port", "8080"}, "work_dir": "/app",
			"ports": []interface{}{"8080:80", "9000/udp", "0.0.0.0:1:2"}, "labels": map[string]interface{}{"team": "ml"},
			"mounts": []interface{}{map[string]interface{}{"source": "data", "target": "/data", "readonly": true}}}, ""},
		// The allocation directory does not exist at submit time: an
		// absolute source is left to the client.
		{"absolute mount left to the client", mount(map[string]interface{}{"source": "/etc", "target": "/e"}), ""},
		{"unknown key", map[string]interface{}{"image": "x", "imagee": "y"}, `unknown key "imagee" (the docker driver accepts image, command, args, work_dir, ports, mounts, labels, privileged, cap_add, cap_drop, network_mode, pid_mode, ipc_mode and userns_mode)`},
		{"no image", map[string]interface{}{"command": "/bin/true"}, `key "image" is required`},
		{"image a number", map[string]interface{}{"image": float64(3)}, `key "image" must be a non-empty string, got a number 3`},
		{"command a list", map[string]interface{}{"image": "x", "command": []interface{}{"a"}}, `key "command" must be a string, got a list of 1 item`},
		{"args numbers", map[string]interface{}{"image": "x", "args": []interface{}{float64(1), float64(2)}}, `key "args": element 0 must be a string, got a number 1`},
		{"relative work_dir", map[string]interface{}{"image": "x", "work_dir": "app"}, `key "work_dir" must be an absolute path in the container, got a string "app"`},
		{"ports a string", map[string]interface{}{"image": "x", "ports": "80"}, `key "ports" must be a list of strings, got a string "80"`},
		{"port a number", map[string]interface{}{"image": "x", "ports": []interface{}{float64(80)}}, `key "ports": element 0 must be a string, got a number 80`},
		{"bad port", map[string]interface{}{"image": "x", "ports": []interface{}{"80:http"}}, `key "ports": element 0 "80:http": port "http" is not a number from 1 to 65535`},
		{"labels a list", map[string]interface{}{"image": "x", "labels": []interface{}{"a"}}, `key "labels" must be a map of strings, got a list of 1 item`},
		{"label a bool", map[string]interface{}{"image": "x", "labels": map[string]interface{}{"a": true}}, `key "labels": label "a" must be a string, got a bool true`},
		{"reserved label", map[string]interface{}{"image": "x", "labels": map[string]interface{}{"gpulayer.job": "x"}}, `uses the reserved prefix "gpulayer."`},
		{"mounts a string", map[string]interface{}{"image": "x", "mounts": "data:/data"}, `key "mounts" must be a list of {source, target, readonly} blocks, got a string "data:/data"`},
		{"mount a string", map[string]interface{}{"image": "x", "mounts": []interface{}{"data"}}, `key "mounts": element 0 must be a {source, target, readonly} block, got a string "data"`},
		{"mount unknown key", mount(map[string]interface{}{"source": "a", "target": "/a", "mode": "rw"}), `key "mounts": element 0: unknown key "mode" (a mount accepts source, target and readonly)`},
		{"mount no target", mount(map[string]interface{}{"source": "a"}), `key "mounts": element 0 needs a source and an absolute target, got source a string "a" and target nothing (null)`},
		{"mount readonly a string", mount(map[string]interface{}{"source": "a", "target": "/a", "readonly": "yes"}), `key "mounts": element 0: readonly must be true or false, got a string "yes"`},
		{"mount climbs out", mount(map[string]interface{}{"source": "main/../../x", "target": "/a"}), `key "mounts": mount "main/../../x" (element 0) is refused: it climbs out of the allocation directory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateConfig(tc.cfg, nil)
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
// ValidateConfig under "docker" and that a second registration panics.
func TestValidatorRegistered(t *testing.T) {
	err := structs.ValidateDriverConfig(Name, map[string]interface{}{"image": "x", "imagee": "y"}, nil)
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), `unknown key "imagee"`) {
		t.Fatalf("ValidateDriverConfig = %v, want the docker validator's refusal", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering the docker validator twice did not panic")
		}
	}()
	structs.RegisterDriverConfigValidator(Name, ValidateConfig)
}

// FuzzValidateDockerConfig decodes a JSON object as the HTTP API does and
// checks that the server's validator refuses every config the client's
// parser refuses for its shape, accepts every config the client accepts,
// and that no message names a Go type.
func FuzzValidateDockerConfig(f *testing.F) {
	for _, s := range []string{
		`{"image":"app","ports":["8080:80"],"mounts":[{"source":"data","target":"/data","readonly":true}]}`,
		`{"image":"app","args":[1,2],"labels":{"a":1}}`,
		`{"image":"","imagee":"x"}`,
		`{"image":"x","mounts":[{"source":"../x","target":"/x"}]}`,
		`{"image":"x","mounts":[{"source":"/etc","target":"/x"}]}`,
		`{"image":"x","work_dir":null,"ports":[null]}`,
	} {
		f.Add([]byte(s))
	}
	alloc := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]interface{}
		if json.Unmarshal(data, &m) != nil {
			return
		}
		verr := ValidateConfig(m, nil)
		_, perr := parseConfig(m, alloc, Allowances{})
		if perr != nil && !errors.Is(perr, driver.ErrInvalidConfig) {
			t.Fatalf("parseConfig error %v does not wrap ErrInvalidConfig", perr)
		}
		if perr == nil && verr != nil {
			t.Fatalf("the client accepts %s but the server refuses it: %v", data, verr)
		}
		// The client refuses more (a source outside its allocation
		// directory) but never for a config's shape alone.
		if verr == nil && perr != nil && !strings.Contains(perr.Error(), `key "mounts": mount `) {
			t.Fatalf("the server accepts %s but the client refuses it: %v", data, perr)
		}
		for _, err := range []error{verr, perr} {
			if err == nil {
				continue
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
