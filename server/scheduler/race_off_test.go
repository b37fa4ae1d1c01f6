//go:build !race

package scheduler

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = false
