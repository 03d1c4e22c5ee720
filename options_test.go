package statestore_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/quota"
)

// TestOptionsDefaultsAndRefusals: zero Options fields take their
// defaults; an Options without Dir or with a limit out of range is
// refused with INVALID_ARGUMENT naming the field, before any file exists;
// a second Open of the same Dir is refused with ErrLocked.
func TestOptionsDefaultsAndRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if got, want := f.s.Limits(), quota.Default(); got != want {
		t.Errorf("limits %+v, want the defaults %+v", got, want)
	}
	if statestore.StoreDirName != recovery.StoreDirName {
		t.Errorf("the store keeps its files in %q, the tools look in %q", statestore.StoreDirName, recovery.StoreDirName)
	}
	if _, err := os.Stat(filepath.Join(f.dir, statestore.StoreDirName, "LOCK")); err != nil {
		t.Errorf("the store's files are not in Dir/%s: %v", statestore.StoreDirName, err)
	}
	_, err := statestore.Open(f.opts)
	if wantCode(t, err, statestore.Unavailable, "store"); !errors.Is(err, statestore.ErrLocked) {
		t.Errorf("second Open: %v, want ErrLocked", err)
	}
	for _, tc := range []struct {
		name  string
		opts  statestore.Options
		field string
	}{
		{"no Dir", statestore.Options{}, "Dir"},
		{"negative limit", statestore.Options{Limits: quota.Limits{MaxEntriesPerNamespace: -1}}, "Limits"},
	} {
		// Without Dir, a store would land in the working directory.
		dir := "."
		if tc.field != "Dir" {
			dir = t.TempDir()
			tc.opts.Dir = dir
		}
		_, err := statestore.Open(tc.opts)
		wantCode(t, err, statestore.InvalidArgument, tc.field)
		if _, err := os.Stat(filepath.Join(dir, statestore.StoreDirName)); !os.IsNotExist(err) {
			t.Errorf("%s: the refused Open created %s in %s (%v)", tc.name, statestore.StoreDirName, dir, err)
		}
	}
}
