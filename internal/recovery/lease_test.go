package recovery_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// TestLeasedLiveConfigurationRefused: an MQTT bridge's namespace refuses
// every TTL at admission, so a journal record, a checkpoint image or a
// backup holding a leased entry there is refused, naming the entry, where
// it is stored and the rule; the same lease in a namespace that takes
// leases, or the same entry without one, is accepted.
func TestLeasedLiveConfigurationRefused(t *testing.T) {
	t.Parallel()
	chk, err := recovery.NewChecker(quota.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	put := func(ns string, expiresMs int64) *journal.Record {
		return &journal.Record{Kind: journal.KindPut, Namespace: ns, Key: "bridge", Revision: 1, TimeMs: 1,
			Schema: schema.MediaIntentV1, Owner: "alice", CreatedMs: 1, UpdatedMs: 1, ExpiresMs: expiresMs, Document: docN(1)}
	}
	// image writes a checkpoint of rec and returns its path and bytes.
	image := func(t *testing.T, rec *journal.Record) (string, []byte) {
		v := materialize.New()
		if _, err := v.Apply(rec); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), checkpoint.Name(1))
		if _, err := checkpoint.WriteFile(path, v, 1, 1); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return path, b
	}
	tests := []struct {
		name    string
		ns      string
		expires int64
		refused bool
	}{
		{"leased bridge", "service/mqtt-north", 60000, true},
		{"bridge without a lease", "service/mqtt-north", 0, false},
		{"leased service", "service/north", 60000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := put(tc.ns, tc.expires)
			path, b := image(t, rec)
			where := map[string]error{"journal": chk.Check(materialize.New(), 7, rec)}
			_, _, where["checkpoint"] = chk.LoadImage(checkpoint.File{Path: path, Index: 1})
			_, _, where["backup"] = chk.DecodeBackup(bytes.NewReader(b))
			for what, err := range where {
				if !tc.refused {
					if err != nil {
						t.Errorf("%s refused: %v", what, err)
					}
					continue
				}
				var le *recovery.LeaseError
				if !errors.As(err, &le) || le.Namespace != tc.ns || le.Key != "bridge" || le.ExpiresMs != tc.expires {
					t.Fatalf("%s: %v, want a LeaseError for %s/bridge", what, err, tc.ns)
				}
				want := map[string]string{"journal": "at journal index 7", "checkpoint": "in checkpoint " + path, "backup": "in the backup"}[what]
				if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "MQTT integration state") || !strings.Contains(err.Error(), "takes no TTL") {
					t.Errorf("%s: %q does not say %q, the class and the rule", what, err, want)
				}
			}
		})
	}
}
