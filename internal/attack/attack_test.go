package attack_test

import (
	"context"
	"testing"

	"github.com/keeppeek/statestore/internal/attack"
)

// TestAttacks runs the suite at the scale KP_ATTACK_SCALE names (small by
// default): every attack gets its expected answers and the bystander's
// compare-and-sets are answered within attack.LivenessBound during and
// after it. Not parallel: the bystander's waits are the measure, and
// another attack's load would be blamed on this one.
func TestAttacks(t *testing.T) {
	sc := attack.ScaleFromEnv()
	for _, a := range attack.Attacks {
		t.Run(a.Name, func(t *testing.T) {
			res, err := attack.Run(context.Background(), a, t.TempDir(), sc)
			t.Logf("%s scale: %s", sc.Name, res)
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
