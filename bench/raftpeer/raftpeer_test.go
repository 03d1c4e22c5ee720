package raftpeer

import (
	"os"
	"testing"
	"time"
)

// TestAppendCommitsOnAQuorum: every Append is applied by the leader
// before it returns, and reaches every node's no-op FSM; the entries land
// in the nodes' logs, raft-wal's or raftlog's.
func TestAppendCommitsOnAQuorum(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		log  Log
	}{{NameFloor, RaftWAL}, {NameRaftlogFloor, Raftlog}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			c, err := OpenLog(dir, 3, 512, tc.log)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			base := c.Applied()
			const n = 20
			for i := range n {
				before := c.Applied()
				if err := c.CAS(i); err != nil {
					t.Fatal(err)
				}
				if c.Applied() <= before {
					t.Fatalf("append %d returned before the leader applied it", i)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for c.Applied() < base+3*n && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond) // followers apply on their next heartbeat: bounded by deadline
			}
			if got := c.Applied() - base; got != 3*n {
				t.Fatalf("%d applications of %d entries on 3 nodes, want %d", got, n, 3*n)
			}
			for i, nd := range c.nodes {
				last, err := nd.logs.LastIndex()
				if err != nil || last < n {
					t.Fatalf("node %d: the log's last index %d (%v), want at least %d", i, last, err, n)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOpenRefusesBadSizes: a size that is not positive is refused before
// anything is started or written.
func TestOpenRefusesBadSizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ nodes, size int }{{0, 1}, {1, 0}, {-1, 1}} {
		dir := t.TempDir()
		if _, err := Open(dir, tc.nodes, tc.size); err == nil {
			t.Fatalf("Open(nodes %d, size %d) succeeded", tc.nodes, tc.size)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Fatalf("Open(nodes %d, size %d) wrote %d entries", tc.nodes, tc.size, len(names))
		}
	}
}

// TestAppendFollowsANewLeader: once leadership has moved, an Append sent
// to the old leader (refused: not the leader) goes to the new one and
// commits; without that, a loaded machine that missed one heartbeat failed
// a whole qualify run's floor row.
func TestAppendFollowsANewLeader(t *testing.T) {
	t.Parallel()
	c, err := Open(t.TempDir(), 3, 512)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	old := c.leader.Load()
	if err := old.LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	before := c.Applied()
	if err := c.Append(); err != nil {
		t.Fatalf("append after the leader moved: %v", err)
	}
	if c.leader.Load() == old {
		t.Fatal("Append still writes to the node that no longer leads")
	}
	if c.Applied() <= before {
		t.Fatal("Append returned before the new leader applied the entry")
	}
}
