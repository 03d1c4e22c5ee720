//go:build race

package attack_test

// raceEnabled: the race detector multiplies memory, so the resident-set
// figures are not measured.
const raceEnabled = true
