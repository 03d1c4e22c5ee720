//go:build race

package workerproc_test

// raceEnabled: the test binary runs under the race detector, so the
// binaries it builds and starts do too.
const raceEnabled = true
