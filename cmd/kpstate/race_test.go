//go:build race

package main

// raceEnabled: the test binary runs under the race detector, so the
// kpstate it builds does too.
const raceEnabled = true
