//go:build race

package nemesis

// raceEnabled: every node process is the race-built test binary too, several
// times slower, so TestNemesis runs fewer events and no long run.
const raceEnabled = true
