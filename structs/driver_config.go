package structs

import (
	"fmt"
	"sort"
	"sync"
)

// DriverConfigValidator checks a task's driver config block as submitted,
// before the job is registered or planned. cfg is the task's Config as
// decoded from the API (JSON numbers are float64, lists []interface{},
// blocks and maps map[string]interface{}); res is the task's resources
// after Job.Canonicalize, possibly nil. A validator must be pure: it may
// not look at the filesystem, the network or the clock, because it runs on
// servers that cannot see the client that will run the task. It returns
// nil or an error whose message names the offending key, e.g.
// `key "cpu_hard_limit" must be true or false, got a string "yes"`,
// without Go type names and without a "config:" prefix (Job.Validate adds
// the group, the task and "config:").
type DriverConfigValidator func(cfg map[string]interface{}, res *Resources) error

var (
	driverConfigMu         sync.RWMutex
	driverConfigValidators = map[string]DriverConfigValidator{}
)

// RegisterDriverConfigValidator makes fn the config validator of the task
// driver called name. Driver packages call it from init, as database/sql
// drivers call sql.Register. It panics when name is empty, fn is nil or
// name already has a validator: two packages claiming one driver name is a
// build mistake that must stop the binary at start-up.
func RegisterDriverConfigValidator(name string, fn DriverConfigValidator) {
	if name == "" {
		panic("structs: RegisterDriverConfigValidator with an empty driver name")
	}
	if fn == nil {
		panic(fmt.Sprintf("structs: RegisterDriverConfigValidator(%q) with a nil validator", name))
	}
	driverConfigMu.Lock()
	defer driverConfigMu.Unlock()
	if _, dup := driverConfigValidators[name]; dup {
		panic(fmt.Sprintf("structs: RegisterDriverConfigValidator called twice for driver %q", name))
	}
	driverConfigValidators[name] = fn
}

// DriverConfigValidators returns the names of the drivers that have a
// config validator, sorted.
func DriverConfigValidators() []string {
	driverConfigMu.RLock()
	defer driverConfigMu.RUnlock()
	names := make([]string, 0, len(driverConfigValidators))
	for n := range driverConfigValidators {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DriverConfigError is the error ValidateDriverConfig returns for a config
// its driver refuses. Its message is the validator's, unchanged; it
// matches ErrInvalid with errors.Is and unwraps to the validator's error.
type DriverConfigError struct {
	// Driver is the task's driver name, e.g. "native".
	Driver string
	// Err is the validator's error.
	Err error
}

// Error returns the validator's message.
func (e *DriverConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the validator's error.
func (e *DriverConfigError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalid.
func (e *DriverConfigError) Is(target error) bool { return target == ErrInvalid }

// ValidateDriverConfig checks cfg with the validator registered for
// driver and returns a *DriverConfigError (matching ErrInvalid) when it
// refuses the config. A driver without a registered validator is not
// checked here and returns nil: Job.Validate refuses names outside
// KnownDrivers on its own, and a binary built without a driver package
// (a test of the server alone) leaves its configs to the client.
func ValidateDriverConfig(driver string, cfg map[string]interface{}, res *Resources) error {
	driverConfigMu.RLock()
	fn := driverConfigValidators[driver]
	driverConfigMu.RUnlock()
	if fn == nil {
		return nil
	}
	if err := fn(cfg, res); err != nil {
		return &DriverConfigError{Driver: driver, Err: err}
	}
	return nil
}
