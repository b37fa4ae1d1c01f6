package structs

import (
	"errors"
	"strings"
	"testing"
)

// withValidator registers fn for name for the length of the test only.
func withValidator(t *testing.T, name string, fn DriverConfigValidator) {
	t.Helper()
	RegisterDriverConfigValidator(name, fn)
	t.Cleanup(func() {
		driverConfigMu.Lock()
		delete(driverConfigValidators, name)
		driverConfigMu.Unlock()
	})
}

// errCommandRequired is the test validator's refusal.
var errCommandRequired = errors.New(`key "command" is required`)

// needsCommand refuses a config without a "command" key, and one with
// "hard" but no CPU resource.
func needsCommand(cfg map[string]interface{}, res *Resources) error {
	if _, ok := cfg["command"]; !ok {
		return errCommandRequired
	}
	if _, ok := cfg["hard"]; ok && (res == nil || res.CPU <= 0) {
		return errors.New(`key "hard" needs cpu`)
	}
	return nil
}

func TestRegisterDriverConfigValidatorPanics(t *testing.T) {
	withValidator(t, "test-dup", needsCommand)
	cases := []struct {
		name   string
		driver string
		fn     DriverConfigValidator
		want   string
	}{
		{"duplicate", "test-dup", needsCommand, `called twice for driver "test-dup"`},
		{"empty name", "", needsCommand, "empty driver name"},
		{"nil validator", "test-nil", nil, "nil validator"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, tc.want) {
					t.Fatalf("recovered %v, want a panic containing %q", r, tc.want)
				}
			}()
			RegisterDriverConfigValidator(tc.driver, tc.fn)
		})
	}
	if got := DriverConfigValidators(); !containsString(got, "test-dup") || containsString(got, "test-nil") {
		t.Fatalf("validators %v after the panics", got)
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestValidateDriverConfig(t *testing.T) {
	withValidator(t, "test-vdc", needsCommand)
	cases := []struct {
		name   string
		driver string
		cfg    map[string]interface{}
		res    *Resources
		want   string // "" means accepted
	}{
		{"good", "test-vdc", map[string]interface{}{"command": "x"}, nil, ""},
		{"refused", "test-vdc", map[string]interface{}{}, nil, `key "command" is required`},
		{"resources passed", "test-vdc", map[string]interface{}{"command": "x", "hard": true}, &Resources{MemoryMB: 10}, `key "hard" needs cpu`},
		{"resources passed and fine", "test-vdc", map[string]interface{}{"command": "x", "hard": true}, &Resources{CPU: 100}, ""},
		{"no validator registered", "test-none", map[string]interface{}{}, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateDriverConfig(tc.driver, tc.cfg, tc.res)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var dce *DriverConfigError
			if !errors.As(err, &dce) || dce.Driver != tc.driver || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %#v, want a *DriverConfigError for %q matching ErrInvalid", err, tc.driver)
			}
			if err.Error() != tc.want {
				t.Fatalf("error %q, want %q (the validator's message, unchanged)", err, tc.want)
			}
		})
	}
	if err := ValidateDriverConfig("test-vdc", nil, nil); !errors.Is(err, errCommandRequired) {
		t.Fatalf("error %v does not unwrap to the validator's error", err)
	}
}

// TestJobValidateDriverConfig checks that Job.Validate runs the driver's
// validator, names the group, task and "config", and that an unknown
// driver is refused by name without reaching any validator.
func TestJobValidateDriverConfig(t *testing.T) {
	// No driver package is linked into this test, so "native" has no
	// validator of its own here.
	withValidator(t, "native", needsCommand)
	job := func(driver string, cfg map[string]interface{}, res *Resources) *Job {
		j := &Job{ID: "j", Type: JobTypeBatch, TaskGroups: []*TaskGroup{{Name: "g", Count: 1, Tasks: []*Task{{
			Name: "t", Driver: driver, Config: cfg, Resources: res,
		}}}}}
		j.Canonicalize()
		return j
	}
	cases := []struct {
		name    string
		job     *Job
		want    string // "" means valid
		notWant string
	}{
		{"good", job("native", map[string]interface{}{"command": "x"}, nil), "", ""},
		{"bad config", job("native", map[string]interface{}{"args": []interface{}{}}, nil), `group "g": task "t": config: key "command" is required`, ""},
		{"resources after canonicalize", job("native", map[string]interface{}{"command": "x", "hard": true}, nil), "", ""},
		{"zero cpu", job("native", map[string]interface{}{"command": "x", "hard": true}, &Resources{MemoryMB: 32}), `group "g": task "t": config: key "hard" needs cpu`, ""},
		{"unknown driver", job("qemu", map[string]interface{}{}, nil), `task "t": driver: unknown driver "qemu"`, "config:"},
		{"known driver without validator", job("docker", map[string]interface{}{}, nil), "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.job.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Fatalf("error %q contains %q", err, tc.notWant)
			}
		})
	}
}
