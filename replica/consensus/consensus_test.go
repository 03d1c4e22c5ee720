package consensus_test

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/keeppeek/statestore/replica/consensus"
)

// TestMark: a marked error reads as the engine's error and matches both
// the outcome and what the engine's error wraps; nil stays nil.
func TestMark(t *testing.T) {
	t.Parallel()
	engineErr := errors.New("node is not the leader")
	for _, tc := range []struct {
		name     string
		sentinel error
		err      error
	}{
		{"not leader", consensus.ErrNotLeader, engineErr},
		{"unknown", consensus.ErrOutcomeUnknown, engineErr},
		{"wrapped cause", consensus.ErrNothingNewToSnapshot, &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}},
	} {
		m := consensus.Mark(tc.sentinel, tc.err)
		if m.Error() != tc.err.Error() {
			t.Errorf("%s: message %q, want the engine's %q", tc.name, m, tc.err)
		}
		if !errors.Is(m, tc.sentinel) || !errors.Is(m, tc.err) {
			t.Errorf("%s: errors.Is misses the outcome or the engine's error", tc.name)
		}
		for _, other := range []error{consensus.ErrNotLeader, consensus.ErrOutcomeUnknown, consensus.ErrNothingNewToSnapshot} {
			if other != tc.sentinel && errors.Is(m, other) {
				t.Errorf("%s: also matches %v", tc.name, other)
			}
		}
	}
	if !errors.Is(consensus.Mark(consensus.ErrNotLeader, &fs.PathError{Err: fs.ErrNotExist}), fs.ErrNotExist) {
		t.Error("errors.Is does not reach through the engine's error")
	}
	if consensus.Mark(consensus.ErrNotLeader, nil) != nil {
		t.Error("a nil error marked is not nil")
	}
}

// TestStateString: every role in lower case, and an unknown value named
// so.
func TestStateString(t *testing.T) {
	t.Parallel()
	for s, want := range map[consensus.State]string{consensus.Follower: "follower", consensus.Candidate: "candidate",
		consensus.Leader: "leader", consensus.Shutdown: "shutdown", consensus.State(9): "unknown"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d) = %q, want %q", s, got, want)
		}
	}
}
