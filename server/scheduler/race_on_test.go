//go:build race

package scheduler

// raceEnabled is true when the tests run under the race detector, which
// slows the property test about tenfold; it then runs fewer workloads (the
// plain run, also part of make test, runs all 2,000).
const raceEnabled = true
