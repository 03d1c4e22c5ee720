//go:build !race

package schema

// raceEnabled: see race_test.go.
const raceEnabled = false
