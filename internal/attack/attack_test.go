package attack_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/keeppeek/statestore/internal/attack"
)

var scaleFlag = flag.String("attack.scale", "", `the attacks' scale: "small" (the default, for CI) or "full" (issue 31's sizes); KP_ATTACK_SCALE=full too`)

func scale(t *testing.T) attack.Scale {
	var sc attack.Scale
	switch *scaleFlag {
	case "":
		sc = attack.ScaleFromEnv()
	case "small":
		sc = attack.Small
	case "full":
		sc = attack.Full
	default:
		t.Fatalf("-attack.scale %q: want small or full", *scaleFlag)
	}
	if raceEnabled {
		sc.Memory = false
	}
	return sc
}

// run runs one attack and fails the test on any unexpected answer or a
// bystander past the liveness bound. The attack tests are not parallel:
// the bystander's waits are the measure, and another attack's load would
// be blamed on this one. A liveness failure alone is tried once more on a
// fresh server: CI's two shared cores, under the race detector and beside
// other packages' tests, can hold one answer (or one fdatasync) for a
// second now and then, while an attack that stalls the bystander does so
// every time.
func run(t *testing.T, a attack.Attack) {
	sc := scale(t)
	for try := 1; ; try++ {
		res, err := attack.Run(context.Background(), a, t.TempDir(), sc)
		t.Logf("%s scale: %s", sc.Name, res)
		var le *attack.LivenessError
		if err != nil && try == 1 && onlyLiveness(err) && errors.As(err, &le) {
			t.Logf("try %d: %v; once more", try, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
}

// onlyLiveness reports whether every error joined in err is a
// LivenessError.
func onlyLiveness(err error) bool {
	var le *attack.LivenessError
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !errors.As(e, &le) {
				return false
			}
		}
		return true
	}
	return errors.As(err, &le)
}

// The attacks, one test each: doc.go's invariants name them.

func TestIdleConnectionsAreClosed(t *testing.T)    { run(t, attack.IdleConnections) }
func TestConnectionAndSessionCaps(t *testing.T)    { run(t, attack.Caps) }
func TestStalledSessionsStayInBudget(t *testing.T) { run(t, attack.StalledSessions) }
func TestWatchQuotaPerPrincipal(t *testing.T)      { run(t, attack.WatchQuota) }
func TestIdleSessionsEnd(t *testing.T)             { run(t, attack.IdleSessions) }
func TestNamespaceTricks(t *testing.T)             { run(t, attack.Namespaces) }
func TestMalformedInput(t *testing.T)              { run(t, attack.Malformed) }
func TestContentGuardOverTheWire(t *testing.T)     { run(t, attack.Guard) }
func TestHandshakeRefusals(t *testing.T)           { run(t, attack.Handshakes) }
func TestWatchAndSnapshotBounds(t *testing.T)      { run(t, attack.WatchBounds) }

// TestEveryAttackHasItsTest keeps the suite and the tests above one list.
func TestEveryAttackHasItsTest(t *testing.T) {
	t.Parallel()
	if len(attack.Attacks) != 10 {
		t.Fatalf("%d attacks; a new one needs its test above (and its invariant in doc.go)", len(attack.Attacks))
	}
	seen := map[string]bool{}
	for _, a := range attack.Attacks {
		if a.Name == "" || a.Run == nil || seen[a.Name] {
			t.Errorf("attack %q: unnamed, without Run, or named twice", a.Name)
		}
		seen[a.Name] = true
	}
}

// TestTwentyNineTricks: issue 31's count, each distinct, each expecting a
// refusal that names the namespace or the key.
func TestTwentyNineTricks(t *testing.T) {
	t.Parallel()
	if len(attack.Tricks) != 29 {
		t.Fatalf("%d tricks, want issue 31's 29", len(attack.Tricks))
	}
	seen := map[string]bool{}
	for _, tr := range attack.Tricks {
		k := tr.Principal + "\x00" + tr.Namespace + "\x00" + tr.Key
		if seen[k] || seen[tr.Name] {
			t.Errorf("trick %q repeats another", tr.Name)
		}
		seen[k], seen[tr.Name] = true, true
		if tr.Field != "namespace" && tr.Field != "key" {
			t.Errorf("trick %q expects field %q", tr.Name, tr.Field)
		}
	}
}

// TestRunFailsAStalledBystander: the liveness check itself. An attack that
// holds the store's next fdatasync past attack.LivenessBound (which the
// bystander's compare-and-set waits behind) makes Run fail with a
// LivenessError, though the attack itself reports nothing wrong.
func TestRunFailsAStalledBystander(t *testing.T) {
	t.Parallel()
	stall := attack.Attack{Name: "stall", Run: func(_ context.Context, e *attack.Env) error {
		entered, release, restore := e.S.Faults.StallNextSync()
		defer restore()
		defer release()
		<-entered
		<-time.After(attack.LivenessBound + 200*time.Millisecond)
		return nil
	}}
	_, err := attack.Run(context.Background(), stall, t.TempDir(), attack.Small)
	var le *attack.LivenessError
	if !errors.As(err, &le) || le.When != "during" || le.Max <= attack.LivenessBound {
		t.Fatalf("Run = %v, want a LivenessError during the attack over %v", err, attack.LivenessBound)
	}
}

// TestRunReportsTheAttacksError: an attack's own failure is Run's.
func TestRunReportsTheAttacksError(t *testing.T) {
	t.Parallel()
	boom := fmt.Errorf("answered 200, want 401")
	_, err := attack.Run(context.Background(), attack.Attack{Name: "fails", Run: func(context.Context, *attack.Env) error { return boom }},
		t.TempDir(), attack.Small)
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the attack's error", err)
	}
}
