package etcdpeer

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// casAndConflict runs nine CASes over db's three keys, then checks that a
// stale expectation is refused.
func casAndConflict(t *testing.T, db *DB) {
	t.Helper()
	for i := 0; i < 9; i++ {
		if err := db.CAS(i % db.Keys()); err != nil {
			t.Fatalf("CAS %d: %v", i, err)
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
}

func TestCAS(t *testing.T) {
	t.Parallel()
	db, err := Open(t.TempDir(), 3, 2193)
	if err != nil {
		t.Fatal(err)
	}
	casAndConflict(t, db)
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// TestGRPCCAS: OpenGRPC's clients reach the member over its loopback TCP
// listener, each on a connection of its own, and CAS and its conflict
// behave as through the in-process client.
func TestGRPCCAS(t *testing.T) {
	t.Parallel()
	db, err := OpenGRPC(t.TempDir(), 3, 2193, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	listener := db.etcds[0].Clients[0].Addr().String()
	eps := db.Endpoints()
	if len(eps) != 2 {
		t.Fatalf("%d clients, want 2", len(eps))
	}
	for i, ep := range eps {
		if len(ep) != 1 || ep[0] != listener {
			t.Fatalf("client %d reaches %v, want the listener %s", i, ep, listener)
		}
		host, _, err := net.SplitHostPort(ep[0])
		if err != nil || !net.ParseIP(host).IsLoopback() {
			t.Fatalf("client %d endpoint %q is not loopback TCP (%v)", i, ep[0], err)
		}
	}
	if db.clis[0].ActiveConnection() == db.clis[1].ActiveConnection() {
		t.Fatal("the two clients share one gRPC connection")
	}
	if db.client(0) == db.client(1) || db.client(0) != db.client(2) {
		t.Fatal("keys are not spread over the clients by key mod conns")
	}
	casAndConflict(t, db)
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// TestOpenGRPCRefusesBadSizes: a size that is not positive is refused
// before anything is started or written.
func TestOpenGRPCRefusesBadSizes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		keys, docSize, conns int
	}{
		{"no keys", 0, 2193, 1},
		{"no document", 3, 0, 1},
		{"no connection", 3, 2193, 0},
		{"negative connections", 3, 2193, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db, err := OpenGRPC(dir, tc.keys, tc.docSize, tc.conns)
			if err == nil {
				db.Close()
				t.Fatal("opened")
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("refused open left %d entries in its directory", len(entries))
			}
		})
	}
}

// TestWatchSeesEveryLaterPut: watchers on two gRPC clients see each later
// put's ModRevision, in order, and not the document from before.
func TestWatchSeesEveryLaterPut(t *testing.T) {
	t.Parallel()
	db, err := OpenGRPC(t.TempDir(), 1, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	seen := make([]chan int64, 2)
	for i := range seen {
		seen[i] = make(chan int64, 8)
		ch := seen[i]
		if err := db.Watch(0, i, func(rev int64) { ch <- rev }); err != nil {
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
				t.Fatalf("watcher %d saw no put of revision %d", i, db.Revision(0))
			}
		}
	}
}
