//go:build race

package agent_test

// raceEnabled: this test binary was built with -race.
const raceEnabled = true
