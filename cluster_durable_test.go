package statestore_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/internal/uring"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/replica/raftlog"
	"github.com/keeppeek/statestore/watch"
)

// The cluster tests of the durable default (replica.Raft's LogStore and
// StableStore nil): restarts on the same directories, the LOCK, damage in
// the log, and the fdatasync count.

// peer is the peer named id.
func (c *testCluster) peer(id string) statestore.Peer {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.peers {
		if p.ID == id {
			return p
		}
	}
	c.t.Fatalf("no peer %q", id)
	return statestore.Peer{}
}

// node is the open node named id, nil when it is closed.
func (c *testCluster) node(id string) *statestore.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// restart closes node id (if open) and opens it again on its directory,
// waiting until it is ready.
func (c *testCluster) restart(id string) *statestore.Store {
	c.t.Helper()
	if s := c.node(id); s != nil {
		c.stop(s)
	}
	c.start(c.peer(id))
	s := c.node(id)
	select {
	case <-s.Cluster().Ready():
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s not ready after its restart", id)
	}
	return s
}

// acked is the writes a test had acknowledged: key -> revision.
type acked map[string]uint64

// put writes key at s and records its revision, which must exceed every
// revision acknowledged before (revisions never go back).
func (a acked) put(t *testing.T, s *statestore.Store, key string, n int) {
	t.Helper()
	e, err := clusterPut(s, key, n, statestore.Expect{})
	if err != nil {
		t.Fatalf("put %s at %s: %v", key, s.Cluster().NodeID(), err)
	}
	for k, rev := range a {
		if e.Revision <= rev {
			t.Fatalf("put %s answered revision %d, not above %s's %d", key, e.Revision, k, rev)
		}
	}
	a[key] = e.Revision
}

// check reads every acknowledged write at s (linearizable, or this node's
// state under statestore.StaleOK) at its revision.
func (a acked) check(t *testing.T, rctx context.Context, s *statestore.Store) error {
	t.Helper()
	for k, rev := range a {
		e, err := s.Get(rctx, admin, "group/g", k)
		if err != nil {
			return fmt.Errorf("%s: get %s: %w", s.Cluster().NodeID(), k, err)
		}
		if e.Revision != rev {
			return fmt.Errorf("%s: %s at revision %d, acknowledged at %d", s.Cluster().NodeID(), k, e.Revision, rev)
		}
	}
	return nil
}

// watchSnapshot opens a watch on group/g at s and returns its snapshot.
func watchSnapshot(t *testing.T, s *statestore.Store) (*chanSink, *watch.Snapshot) {
	t.Helper()
	sink := newSink()
	ss, err := s.OpenSession(admin, sink)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Watch(ctx, ss, statestore.WatchRequest{WatchID: "w", Namespace: "group/g"}); err != nil {
		t.Fatal(err)
	}
	snap, ok := sink.next(t).(*watch.Snapshot)
	if !ok {
		t.Fatal("the watch did not start with its snapshot")
	}
	return sink, snap
}

// snapshotHolds checks that a watch snapshot holds every acknowledged write.
func (a acked) snapshotHolds(t *testing.T, snap *watch.Snapshot) {
	t.Helper()
	got := map[string]uint64{}
	for _, e := range snap.Entries {
		got[e.Key] = e.Revision
	}
	for k, rev := range a {
		if got[k] != rev || snap.SnapshotRevision < rev {
			t.Fatalf("the snapshot (revision %d) holds %s at %d, acknowledged at %d", snap.SnapshotRevision, k, got[k], rev)
		}
	}
}

// TestClusterRestartFollowerThenLeader: a follower, then the leader, close
// and reopen on their directories while the others keep writing. Every
// acknowledged write is on every node afterwards, revisions go on from
// where they were, the restarted node's watches end with STORE_CLOSED and
// a new watch's snapshot holds everything.
func TestClusterRestartFollowerThenLeader(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	a := acked{}
	for i := range 10 {
		at := c.leader()
		if i%2 == 1 {
			at = c.follower()
		}
		a.put(t, at, fmt.Sprintf("k%d", i), i)
	}
	for _, who := range []string{"follower", "leader"} {
		var s *statestore.Store
		if who == "follower" {
			s = c.follower()
		} else {
			s = c.leader()
		}
		id := s.Cluster().NodeID()
		sink, _ := watchSnapshot(t, s)
		c.stop(s)
		if cl := sink.nextClosed(t); cl.Reason != watch.StoreClosed {
			t.Fatalf("%s's watch closed with %v", who, cl.Reason)
		}
		// Writes go on without it.
		for i := range 5 {
			a.put(t, c.leader(), fmt.Sprintf("%s-away-%d", who, i), i)
		}
		s = c.restart(id)
		if err := a.check(t, ctx, s); err != nil {
			t.Fatalf("after the %s's restart: %v", who, err)
		}
		_, snap := watchSnapshot(t, s)
		a.snapshotHolds(t, snap)
		a.put(t, s, who+"-back", 1)
	}
	for _, s := range c.all() {
		if err := a.check(t, ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

// waitSnapshotFiles waits (bounded) until every node's raft-snapshots
// directory holds a snapshot: the one taken after the bootstrap's
// configuration entry applied.
func waitSnapshotFiles(t *testing.T, c *testCluster) {
	t.Helper()
	for _, p := range c.peers {
		dir := filepath.Join(c.dirs[p.ID], statestore.StoreDirName, "raft-snapshots", "snapshots")
		for i := 0; ; i++ {
			if hasSnapshot(dir) {
				break
			}
			if i == 2000 {
				t.Fatalf("%s took no snapshot after its configuration change", p.ID)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// hasSnapshot reports whether dir, a raft FileSnapshotStore's, holds a
// finished snapshot (a directory with its meta.json, not a .tmp one).
func hasSnapshot(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "meta.json")); err == nil {
				return true
			}
		}
	}
	return false
}

// TestClusterRestartAllThree: every node closes; one reopened alone (no
// quorum, so no leader) replays its log to the persisted commit index and
// serves every acknowledged write as stale reads; once all three are back
// they elect, serve everything linearizably and go on writing.
func TestClusterRestartAllThree(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	a := acked{}
	for i := range 30 {
		a.put(t, c.leader(), fmt.Sprintf("k%d", i%12), i)
	}
	c.quiesce()
	waitSnapshotFiles(t, c)
	for _, s := range c.all() {
		c.stop(s)
	}
	c.start(c.peer("n1"))
	n1 := c.node("n1")
	// The replay runs right after raft starts; bounded poll for it.
	var err error
	for i := 0; i < 2000; i++ {
		if err = a.check(t, statestore.StaleOK(ctx), n1); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("alone, before any leader: %v", err)
	}
	if id, _ := n1.Cluster().Leader(); id != "" {
		t.Fatalf("a leader %q with one node of three", id)
	}
	// It restored its own snapshot from disk: not an install.
	if st := n1.Cluster().Stats(); st.SnapshotsInstalled != 0 {
		t.Errorf("n1 reopened: %v; want no snapshot installed", st)
	}
	for _, id := range []string{"n2", "n3"} {
		c.start(c.peer(id))
	}
	for _, s := range c.all() {
		select {
		case <-s.Cluster().Ready():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not ready", s.Cluster().NodeID())
		}
	}
	for _, s := range c.all() {
		if err := a.check(t, ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	a.put(t, c.follower(), "after", 1)
}

// TestClusterRestartAfterMembershipChangeWithoutSnapshots pins the
// configuration trap of raft's restart replay (replica's restart.go): the
// snapshots are kept in memory, so every restart finds none and the
// configuration lives only in committed log entries; after a join and a
// removal every member closes and reopens, and the cluster still elects
// and serves every acknowledged write.
func TestClusterRestartAfterMembershipChangeWithoutSnapshots(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, func(co *statestore.ClusterOptions) {
		raftOf(co).SnapshotStore = raft.NewInmemSnapshotStore()
		co.Join = co.NodeID == "n4"
	})
	a := acked{}
	a.put(t, c.leader(), "before", 1)
	p4 := statestore.Peer{ID: "n4", RaftAddr: "raft-n4", RPCAddr: "rpc-n4"}
	c.mu.Lock()
	c.peers = append(c.peers, p4)
	c.mu.Unlock()
	c.start(p4)
	if err := c.leader().Cluster().AddVoter(p4); err != nil {
		t.Fatal(err)
	}
	<-c.node("n4").Cluster().Ready()
	a.put(t, c.node("n4"), "joined", 2)
	// Remove a follower other than n4.
	var gone *statestore.Store
	for _, s := range c.all() {
		if !s.Cluster().IsLeader() && s.Cluster().NodeID() != "n4" {
			gone = s
			break
		}
	}
	if err := c.leader().Cluster().RemoveServer(gone.Cluster().NodeID()); err != nil {
		t.Fatal(err)
	}
	c.stop(gone)
	a.put(t, c.leader(), "removed", 3)
	c.quiesce()
	var ids []string
	for _, s := range c.all() {
		ids = append(ids, s.Cluster().NodeID())
		c.stop(s)
	}
	for _, id := range ids {
		c.start(c.peer(id))
	}
	for _, s := range c.all() {
		select {
		case <-s.Cluster().Ready():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not ready: the restarted members did not elect", s.Cluster().NodeID())
		}
	}
	for _, s := range c.all() {
		if err := a.check(t, ctx, s); err != nil {
			t.Fatal(err)
		}
		if m, err := s.Cluster().Members(); err != nil || len(m) != 3 {
			t.Fatalf("%s: members %+v, %v", s.Cluster().NodeID(), m, err)
		}
	}
	a.put(t, c.follower(), "after", 4)
}

// TestClusterRefusesToOpen: a node directory whose LOCK is held (the node
// is open) and a log damaged before its tail both refuse the open; the
// damage is a *raftlog.CorruptError naming the entry's index.
func TestClusterRefusesToOpen(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	a := acked{}
	for i := range 10 {
		a.put(t, c.leader(), fmt.Sprintf("k%d", i), i)
	}
	f := c.follower()
	id := f.Cluster().NodeID()
	p := c.peer(id)
	co := statestore.ClusterOptions{NodeID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr, Peers: c.peers,
		Engine: &replica.Raft{Transport: c.net.Transport("raft-second-" + id), Loopback: c.lb}}
	t.Run("lock held", func(t *testing.T) {
		_, err := c.open(p, co, c.clock)
		if !errors.Is(err, statestore.ErrLocked) || statestore.CodeOf(err) != statestore.Unavailable {
			t.Fatalf("a second open of %s: %v", id, err)
		}
	})
	t.Run("corrupt entry before the tail", func(t *testing.T) {
		c.quiesce()
		c.stop(f)
		dir := filepath.Join(c.dirs[id], statestore.StoreDirName, "journal")
		segs, err := journal.ListSegments(dir)
		if err != nil || len(segs) == 0 {
			t.Fatalf("segments %v, %v", segs, err)
		}
		seg := segs[len(segs)-1]
		data, err := os.ReadFile(seg.Path)
		if err != nil {
			t.Fatal(err)
		}
		lim := journal.DefaultLimits
		lim.MaxRaftEntry = raftlog.DefaultMaxEntryBytes
		sc := journal.NewScanner(data, seg.Start, lim, journal.StopAtDamage)
		// The third entry: well before the tail (10 writes followed it).
		for range 3 {
			sc.Next()
		}
		wantIndex := sc.Index()
		if sc.Damage() != nil || sc.Raw() == nil {
			t.Fatalf("no third entry in %s", seg.Name())
		}
		data[int(sc.End())-len(sc.Raw())/2] ^= 0x40
		if err := os.WriteFile(seg.Path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = c.open(p, co, c.clock)
		var ce *raftlog.CorruptError
		if !errors.As(err, &ce) || ce.Index != wantIndex || statestore.CodeOf(err) != statestore.Unavailable ||
			!strings.Contains(err.Error(), fmt.Sprint(wantIndex)) {
			t.Fatalf("open of a damaged log: %v; want a CorruptError naming index %d", err, wantIndex)
		}
	})
	t.Run("as a single store", func(t *testing.T) {
		// Open (not OpenCluster) names the mistake instead of reading the
		// raft log as a damaged journal, and touches nothing.
		before := treeOf(t, c.dirs[id])
		_, err := statestore.Open(statestore.Options{Dir: c.dirs[id]})
		wantCode(t, err, statestore.InvalidArgument, "Dir")
		if !strings.Contains(err.Error(), "OpenCluster") {
			t.Fatalf("Open of a node's directory: %v; want it to name OpenCluster", err)
		}
		if after := treeOf(t, c.dirs[id]); !maps.Equal(before, after) {
			t.Fatalf("the refused Open changed the directory: %v -> %v", before, after)
		}
	})
}

// treeOf maps every file under dir to its size and modification time.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = fmt.Sprintf("%d %d", info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// syncCounts are one node's fsyncs as its fault hooks see them: the
// journal's acknowledging fdatasyncs, and every other fsync by path.
type syncCounts struct {
	commits atomic.Int64
	mu      sync.Mutex
	others  map[string]int
}

func (sc *syncCounts) other(path string) error {
	sc.mu.Lock()
	sc.others[path]++
	sc.mu.Unlock()
	return nil
}

func (sc *syncCounts) otherCounts() map[string]int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	out := map[string]int{}
	for k, v := range sc.others {
		out[k] = v
	}
	return out
}

// nodeSyncs is what one phase of TestClusterOneFdatasyncPerCommittedBatch
// reads off one node before and after.
type nodeSyncs struct {
	journal  journal.Stats
	commits  int64
	others   map[string]int
	segments int
	batches  uint64 // the store's group-commit batches (BatchOps.Count)
	applied  uint64
}

// TestClusterOneFdatasyncPerCommittedBatch counts every node's fsyncs
// across serial and concurrent writes: each node's log fdatasyncs equal
// its StoreLogs calls (journal Appends), the only other fsyncs are the
// journal directory's once per new segment (tidwall/wal's fsync of the
// sealed segment, the other once-per-segment cost, is not behind a hook:
// the test counts the segments), the stable store is not written (no term
// or vote changed), and the leader commits each group-commit batch as one
// raft entry. The segments are small so that several fill up; NoPrewrite
// keeps the pre-writer's background fdatasyncs of zeros out of the count
// (the journal's doc: they run ahead of the records, never on the commit
// path).
func TestClusterOneFdatasyncPerCommittedBatch(t *testing.T) {
	t.Parallel()
	counts := map[string]*syncCounts{}
	var mu sync.Mutex
	c := newTestClusterOpts(t, 3, nil, func(id string, o *statestore.Options) {
		h := &fault.Hooks{}
		sc := &syncCounts{others: map[string]int{}}
		h.SetSync(func(string) error { sc.commits.Add(1); return nil })
		h.SetDiskSync(sc.other)
		mu.Lock()
		counts[id] = sc
		mu.Unlock()
		o.Faults, o.SegmentSize, o.NoPrewrite = h, 16<<10, true
	})
	waitSnapshotFiles(t, c)
	if _, err := clusterPut(c.leader(), "first", 0, statestore.Expect{}); err != nil {
		t.Fatal(err)
	}
	c.quiesce()
	read := func() map[string]nodeSyncs {
		out := map[string]nodeSyncs{}
		for _, s := range c.all() {
			id := s.Cluster().NodeID()
			segs, err := journal.ListSegments(filepath.Join(c.dirs[id], statestore.StoreDirName, "journal"))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			sc := counts[id]
			mu.Unlock()
			out[id] = nodeSyncs{journal: s.JournalStats(), commits: sc.commits.Load(), others: sc.otherCounts(),
				segments: len(segs), batches: s.Stats().BatchOps.Count, applied: s.Cluster().AppliedIndex()}
		}
		return out
	}
	l := c.leader()
	lid := l.Cluster().NodeID()
	for _, phase := range []struct {
		name    string
		writers int
		each    int
	}{{"serial", 1, 120}, {"concurrent", 16, 20}} {
		t.Run(phase.name, func(t *testing.T) {
			term := l.Cluster().Stats().Term
			before := read()
			var wg sync.WaitGroup
			errs := make(chan error, phase.writers)
			for w := range phase.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range phase.each {
						if _, err := clusterPut(l, fmt.Sprintf("%s-%d-%d", phase.name, w, i), i, statestore.Expect{}); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			c.quiesce()
			after := read()
			if now := l.Cluster().Stats().Term; now != term || !l.Cluster().IsLeader() {
				// A loaded machine can miss a heartbeat: the next term's
				// leader commits entries of its own (its Barrier, the
				// leases' expiry) that are no store batch of these writes.
				t.Skipf("leadership changed during the phase (term %d, now %d): the counts are not this phase's", term, now)
			}
			writes := uint64(phase.writers * phase.each)
			entries := after[lid].applied - before[lid].applied
			batches := after[lid].batches - before[lid].batches
			if batches != entries || entries == 0 || entries > writes || (phase.writers == 1 && entries != writes) {
				t.Fatalf("%d writes went out as %d store batches and %d raft entries", writes, batches, entries)
			}
			for id, b := range before {
				a := after[id]
				appends, syncs := a.journal.Appends-b.journal.Appends, a.journal.Syncs-b.journal.Syncs
				commits := a.commits - b.commits
				jdir := filepath.Join(c.dirs[id], statestore.StoreDirName, "journal")
				newSegs := a.segments - b.segments
				// A StoreLogs whose last entry sealed its segment is made
				// durable by tidwall/wal's fsync of that segment, and then
				// needs no fdatasync of its own: at most one per new segment.
				sealed := int64(appends) - int64(syncs)
				if int64(syncs) != commits || appends == 0 || sealed < 0 || sealed > int64(newSegs) {
					t.Fatalf("%s: %d StoreLogs, %d journal syncs, %d fdatasyncs, %d new segments", id, appends, syncs, commits, newSegs)
				}
				recs := a.journal.Records - b.journal.Records
				if recs != entries {
					t.Fatalf("%s stored %d entries, the leader committed %d", id, recs, entries)
				}
				if recs == appends && sealed != int64(newSegs) {
					// One entry per StoreLogs: the entry reaching the segment
					// size seals it, so every seal ends a batch.
					t.Fatalf("%s: %d single-entry StoreLogs covered by a seal, %d segments sealed", id, sealed, newSegs)
				}
				if id == lid && phase.writers == 1 && appends != writes {
					t.Fatalf("the leader stored %d serial writes in %d StoreLogs", writes, appends)
				}
				// The new segment's directory entry is synced with the
				// first records in it: once per segment, one behind when
				// the last batch sealed a segment and left the new one empty.
				dirs := 0
				for path, n := range a.others {
					if n -= b.others[path]; n == 0 {
						continue
					}
					if path != jdir {
						t.Fatalf("%s: %d fsyncs of %s while writing", id, n, path)
					}
					dirs = n
				}
				if dirs != newSegs && dirs != newSegs-1 {
					t.Fatalf("%s: %d directory fsyncs for %d new segments", id, dirs, newSegs)
				}
				t.Logf("%s: %d entries, %d StoreLogs: %d fdatasyncs + %d covered by a segment seal; %d new segments, %d directory fsyncs",
					id, entries, appends, commits, sealed, newSegs, dirs)
			}
		})
	}
}

// TestClusterSyncParksOnlyWhenWritesWait: a node's raft log holds its
// processor in fdatasync while the node has at most one write in flight
// (a lone writer: nobody else wants the processor, and the io_uring's
// completion costs a commit tens of microseconds at each of its two
// fdatasyncs), and parks on the io_uring once more writes wait. The
// writes are made to wait by holding the leader's sync
// (fault.Hooks.StallNextSync) while they arrive; a round whose writers
// did not all arrive before the release is tried again, at most five
// times.
func TestClusterSyncParksOnlyWhenWritesWait(t *testing.T) {
	t.Parallel()
	probe, err := uring.New()
	if err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	probe.Close()
	hooks := map[string]*fault.Hooks{}
	var mu sync.Mutex
	c := newTestClusterOpts(t, 3, nil, func(id string, o *statestore.Options) {
		h := &fault.Hooks{}
		mu.Lock()
		hooks[id] = h
		mu.Unlock()
		o.Faults = h
	})
	l := c.leader()
	if _, err := clusterPut(l, "first", 0, statestore.Expect{}); err != nil {
		t.Fatal(err)
	}
	c.quiesce()
	parked := func() map[string]uint64 {
		out := map[string]uint64{}
		for _, s := range c.all() {
			out[s.Cluster().NodeID()] = s.JournalStats().ParkedSyncs
		}
		return out
	}
	syncs := func(s *statestore.Store) uint64 { return s.JournalStats().Syncs }
	before, beforeSyncs := parked(), syncs(l)
	f := c.follower()
	for i := range 20 {
		// Through the leader and through a follower, one at a time.
		s := l
		if i%2 == 1 {
			s = f
		}
		if _, err := clusterPut(s, "lone", i, statestore.Expect{}); err != nil {
			t.Fatal(err)
		}
	}
	c.quiesce()
	if n := syncs(l) - beforeSyncs; n < 20 {
		t.Fatalf("the leader synced %d times for 20 writes", n)
	}
	for id, n := range parked() {
		if n != before[id] {
			t.Fatalf("lone writer: %s parked %d fdatasyncs, want none", id, n-before[id])
		}
	}
	lid := l.Cluster().NodeID()
	mu.Lock()
	h := hooks[lid]
	mu.Unlock()
	const writers = 16
	for round := range 5 {
		start := parked()[lid]
		entered, release, restore := h.StallNextSync()
		held := make(chan error, 1)
		go func() {
			_, err := clusterPut(l, "held", round, statestore.Expect{})
			held <- err
		}()
		<-entered
		var wg, arrived sync.WaitGroup
		arrived.Add(writers)
		for w := range writers {
			wg.Go(func() {
				arrived.Done()
				if _, err := clusterPut(l, fmt.Sprintf("w%d", w), round, statestore.Expect{}); err != nil {
					t.Error(err)
				}
			})
		}
		arrived.Wait()
		release()
		restore()
		wg.Wait()
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		if parked()[lid] > start {
			return
		}
	}
	t.Fatalf("%d writers queued behind the leader's held sync, five times: none of its fdatasyncs parked", writers)
}
