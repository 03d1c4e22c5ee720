//go:build !race

package workerproc_test

const raceEnabled = false
