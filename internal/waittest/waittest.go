// Package waittest is the one polling helper of GPUlayer's tests: wait
// for a condition with a deadline, never sleep and hope. It is a test
// helper (its name ends in "test"): only _test.go files and other test
// helpers may import it, which check-imports enforces.
package waittest

import (
	"testing"
	"time"
)

// Interval is how often the helpers poll their condition.
const Interval = 10 * time.Millisecond

// For polls cond every Interval until it returns true, or fails t once
// within has passed, naming what was awaited and cond's last description
// of the state it saw (e.g. "allocation a1: client status pending").
func For(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, desc := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if desc != "" {
				t.Fatalf("timed out after %s waiting for %s (last: %s)", within, what, desc)
			}
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(Interval)
	}
}

// Until is For for a condition that does not describe what it saw.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	For(t, within, what, func() (bool, string) { return cond(), "" })
}

// NoErr is For for a condition that says why it does not hold with an
// error (nil when it holds or has nothing to say).
func NoErr(t testing.TB, within time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	For(t, within, what, func() (bool, string) {
		ok, err := cond()
		if err != nil {
			return ok, "error: " + err.Error()
		}
		return ok, ""
	})
}
