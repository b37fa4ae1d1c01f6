//go:build race

package agent_test

// raceEnabled reports whether the test binary runs under the race
// detector. The multi-process and Docker tests skip then: the agents they
// start are separate processes the detector does not watch, and the
// non-race pass of `make test` already runs them.
const raceEnabled = true
