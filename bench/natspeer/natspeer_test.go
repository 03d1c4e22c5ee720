package natspeer

import (
	"errors"
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// TestCAS: two connections over loopback TCP, keys spread over them by
// key mod conns; nine CASes succeed and a stale expectation is refused.
func TestCAS(t *testing.T) {
	t.Parallel()
	db, err := Open(t.TempDir(), 3, 2193, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u, err := url.Parse(db.URL())
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		t.Fatalf("server listens on %q, want loopback", db.URL())
	}
	if len(db.ncs) != 2 || db.ncs[0] == db.ncs[1] || db.conn(0) == db.conn(1) || db.conn(0) != db.conn(2) {
		t.Fatal("keys are not spread over two connections by key mod conns")
	}
	for i, nc := range db.ncs {
		if nc.ConnectedUrl() != db.URL() {
			t.Fatalf("connection %d reaches %q, want %q", i, nc.ConnectedUrl(), db.URL())
		}
	}
	for i := range 9 {
		before := db.Revision(i % 3)
		if err := db.CAS(i % 3); err != nil {
			t.Fatalf("CAS %d: %v", i, err)
		}
		if db.Revision(i%3) <= before {
			t.Fatalf("CAS %d: revision %d after %d", i, db.Revision(i%3), before)
		}
	}
	stale := db.revs[1]
	if err := db.CAS(1); err != nil {
		t.Fatal(err)
	}
	db.revs[1] = stale
	if err := db.CAS(1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale CAS = %v, want ErrConflict", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// TestServerSyncsEveryWrite: the running server's JetStream syncs every
// write, so an acknowledged CAS is durable as the store's is.
func TestServerSyncsEveryWrite(t *testing.T) {
	t.Parallel()
	db, err := Open(t.TempDir(), 1, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := db.srvs[0].JetStreamConfig()
	if cfg == nil || !cfg.SyncAlways {
		t.Fatalf("JetStream config %+v: SyncAlways is off", cfg)
	}
}

// TestWatchSeesEveryLaterUpdate: watchers on two connections see each
// later update's revision, in order, and not the value from before.
func TestWatchSeesEveryLaterUpdate(t *testing.T) {
	t.Parallel()
	db, err := Open(t.TempDir(), 1, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	seen := make([]chan uint64, 2)
	for i := range seen {
		seen[i] = make(chan uint64, 8)
		ch := seen[i]
		if err := db.Watch(0, i, func(rev uint64) { ch <- rev }); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := db.CAS(0); err != nil {
			t.Fatal(err)
		}
		for i, ch := range seen {
			select {
			case rev := <-ch:
				if rev != db.Revision(0) {
					t.Fatalf("watcher %d saw revision %d, want %d", i, rev, db.Revision(0))
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("watcher %d saw no update of revision %d", i, db.Revision(0))
			}
		}
	}
}

// TestOpenRefusesBadSizes: a size that is not positive is refused before
// anything is started or written.
func TestOpenRefusesBadSizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ keys, size, conns int }{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {-1, 1, 1}} {
		dir := t.TempDir()
		if _, err := Open(dir, tc.keys, tc.size, tc.conns); err == nil {
			t.Fatalf("Open(keys %d, size %d, conns %d) succeeded", tc.keys, tc.size, tc.conns)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Fatalf("Open(keys %d, size %d, conns %d) wrote %d entries", tc.keys, tc.size, tc.conns, len(names))
		}
	}
}
