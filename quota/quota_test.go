package quota

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	l, err := Limits{MaxEntriesPerNamespace: 7}.WithDefaults()
	if err != nil || l.MaxEntriesPerNamespace != 7 || l.MaxTotalBytes != 64<<20 || l.MaxTTL != 24*time.Hour {
		t.Fatalf("%+v %v", l, err)
	}
	if _, err := (Limits{MaxWatches: -1}).WithDefaults(); err == nil || !strings.Contains(err.Error(), "MaxWatches") {
		t.Fatalf("negative field not named: %v", err)
	}
	if _, err := (Limits{MinTTL: time.Hour, MaxTTL: time.Minute}).WithDefaults(); err == nil {
		t.Fatal("MinTTL above MaxTTL accepted")
	}
}

// TestWatchesPerPrincipalDefault: a quarter of MaxWatches, at least 1,
// derived from the MaxWatches in force; a set value is kept, a negative
// one named.
func TestWatchesPerPrincipalDefault(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   Limits
		want int
	}{
		{Limits{}, 256},
		{Limits{MaxWatches: 100}, 25},
		{Limits{MaxWatches: 3}, 1},
		{Limits{MaxWatches: 100, MaxWatchesPerPrincipal: 60}, 60},
	}
	for _, c := range cases {
		l, err := c.in.WithDefaults()
		if err != nil || l.MaxWatchesPerPrincipal != c.want {
			t.Errorf("%+v: MaxWatchesPerPrincipal %d, %v; want %d", c.in, l.MaxWatchesPerPrincipal, err, c.want)
		}
	}
	if Default().MaxWatchesPerPrincipal != DefaultWatchesPerPrincipal(Default().MaxWatches) {
		t.Errorf("Default() disagrees with DefaultWatchesPerPrincipal")
	}
	if _, err := (Limits{MaxWatchesPerPrincipal: -1}).WithDefaults(); err == nil || !strings.Contains(err.Error(), "MaxWatchesPerPrincipal") {
		t.Errorf("negative MaxWatchesPerPrincipal: %v", err)
	}
}

func TestCheckPut(t *testing.T) {
	t.Parallel()
	l := Limits{MaxNamespaces: 2, MaxEntriesPerNamespace: 2, MaxTotalBytes: 100, MaxDocumentBytes: 50}
	tests := []struct {
		name      string
		u         Usage
		replacing bool
		old, new  int64
		bound     string
	}{
		{"fits", Usage{1, 1, 10}, false, 0, 50, ""},
		{"document too big", Usage{}, false, 0, 51, BoundDocumentBytes},
		{"new namespace over count", Usage{2, 0, 0}, false, 0, 1, BoundNamespaces},
		{"existing namespace at count", Usage{2, 1, 0}, false, 0, 1, ""},
		{"entries over", Usage{1, 2, 0}, false, 0, 1, BoundEntriesPerNamespace},
		{"replace at entry bound", Usage{1, 2, 0}, true, 5, 6, ""},
		{"bytes exactly at ceiling", Usage{1, 1, 50}, false, 0, 50, ""},
		{"bytes one over", Usage{1, 1, 51}, false, 0, 50, BoundTotalBytes},
		{"replace shrinks under ceiling", Usage{1, 1, 100}, true, 40, 30, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := l.CheckPut(tc.u, "ns", tc.replacing, tc.old, tc.new)
			if BoundOf(err) != tc.bound {
				t.Fatalf("bound %q, want %q (%v)", BoundOf(err), tc.bound, err)
			}
			if tc.bound != "" && !errors.Is(err, ErrExceeded) {
				t.Fatal("not ErrExceeded")
			}
		})
	}
}

func TestClampTTL(t *testing.T) {
	t.Parallel()
	l := Default()
	tests := []struct {
		in, want time.Duration
		err      bool
	}{
		{0, 0, false},
		{999 * time.Millisecond, 0, true},
		{time.Second, time.Second, false},
		{24*time.Hour + time.Millisecond, 24 * time.Hour, false},
	}
	for _, tc := range tests {
		got, err := l.ClampTTL(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Fatalf("ClampTTL(%v) = %v, %v", tc.in, got, err)
		}
	}
}
