package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/replica/raftlog"
	"github.com/keeppeek/statestore/schema"
)

// testNodes is an in-process cluster on durable directories: raft over an
// in-memory network, forwarded calls in process, each node's log, votes
// and snapshots on disk as OpenCluster's default lays them out.
type testNodes struct {
	t     *testing.T
	net   *replica.InmemNetwork
	lb    *replica.Loopback
	clk   *clock.Fake
	peers []statestore.Peer
	dirs  map[string]string
	nodes map[string]*statestore.Store
}

// newTestNodes starts n nodes n1..nN and waits until each is ready.
func newTestNodes(t *testing.T, n int) *testNodes {
	t.Helper()
	tn := &testNodes{t: t, net: replica.NewInmemNetwork(), lb: replica.NewLoopback(), clk: clock.NewFake(clusterT0),
		dirs: map[string]string{}, nodes: map[string]*statestore.Store{}}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		tn.peers = append(tn.peers, statestore.Peer{ID: id, RaftAddr: "raft-" + id, RPCAddr: "rpc-" + id})
		tn.dirs[id] = t.TempDir()
	}
	for _, p := range tn.peers {
		tn.open(p.ID, tn.peers)
	}
	t.Cleanup(func() {
		for _, p := range tn.peers {
			tn.stop(p.ID)
		}
	})
	for _, p := range tn.peers {
		tn.ready(p.ID)
	}
	return tn
}

// open opens node id on its directory with peers as its configuration.
func (tn *testNodes) open(id string, peers []statestore.Peer) *statestore.Store {
	tn.t.Helper()
	var self statestore.Peer
	for _, p := range tn.peers {
		if p.ID == id {
			self = p
		}
	}
	s, err := statestore.OpenCluster(statestore.Options{Dir: tn.dirs[id], Clock: tn.clk, Schemas: schema.NewRegistry()},
		statestore.ClusterOptions{NodeID: id, RaftAddr: self.RaftAddr, RPCAddr: self.RPCAddr, Peers: peers,
			Engine: &replica.Raft{Transport: tn.net.Transport(self.RaftAddr), Loopback: tn.lb}})
	if err != nil {
		tn.t.Fatalf("open %s: %v", id, err)
	}
	tn.nodes[id] = s
	return s
}

// ready waits until node id has a leader and has caught up.
func (tn *testNodes) ready(id string) {
	tn.t.Helper()
	select {
	case <-tn.nodes[id].Cluster().Ready():
	case <-time.After(20 * time.Second):
		tn.t.Fatalf("%s not ready", id)
	}
}

// stop closes node id (if open) and cuts it off, so the others' calls to
// it fail at once instead of waiting out the in-memory timeout.
func (tn *testNodes) stop(id string) {
	if s := tn.nodes[id]; s != nil {
		s.Close()
		tn.net.Isolate(s.Cluster().NodeID())
		for _, p := range tn.peers {
			if p.ID == id {
				tn.net.Isolate(p.RaftAddr)
			}
		}
		delete(tn.nodes, id)
	}
}

// leader waits, bounded, for the node that admits writes.
func (tn *testNodes) leader() *statestore.Store {
	tn.t.Helper()
	for range 2000 {
		for _, s := range tn.nodes {
			if s.Cluster().IsLeader() {
				return s
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	tn.t.Fatal("no leader within 20 s")
	return nil
}

// caughtUp waits, bounded, until every open node has applied index.
func (tn *testNodes) caughtUp(index uint64) {
	tn.t.Helper()
	for range 2000 {
		behind := false
		for _, s := range tn.nodes {
			behind = behind || s.Cluster().AppliedIndex() < index
		}
		if !behind {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tn.t.Fatalf("the nodes did not all apply index %d within 20 s", index)
}

// write puts n documents (every third one then deleted again) and returns
// the acknowledged state: key -> revision, deleted keys absent. The i-th
// document is doc(i), or doc(alter[i]) where alter names one.
func (tn *testNodes) write(ns string, n int, alter ...map[int]int) map[string]uint64 {
	tn.t.Helper()
	acked := map[string]uint64{}
	for i := range n {
		s := tn.leader()
		key, d := fmt.Sprintf("k%02d", i), i
		for _, a := range alter {
			if x, ok := a[i]; ok {
				d = x
			}
		}
		e, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: doc(d)})
		if err != nil {
			tn.t.Fatalf("put %s: %v", key, err)
		}
		acked[key] = e.Revision
		if i%3 == 2 {
			if _, err := s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: key}); err != nil {
				tn.t.Fatalf("delete %s: %v", key, err)
			}
			delete(acked, key)
		}
	}
	return acked
}

// settle waits until every node applied what the leader did, then stops
// them all: their directories are then a stopped cluster's. It returns
// the leader's applied index.
func (tn *testNodes) settle() uint64 {
	tn.t.Helper()
	idx := tn.leader().Cluster().AppliedIndex()
	tn.caughtUp(idx)
	for _, p := range tn.peers {
		tn.stop(p.ID)
	}
	return idx
}

// raftVerify is verify's --json document on a cluster node.
type raftVerifyJSON struct {
	Layout      string `json:"layout"`
	OK          bool   `json:"ok"`
	FirstIndex  uint64 `json:"first_index"`
	LastIndex   uint64 `json:"last_index"`
	Entries     int    `json:"entries"`
	CommitFloor uint64 `json:"commit_floor"`
	Stable      *struct {
		CurrentTerm uint64 `json:"current_term"`
	} `json:"stable"`
	Snapshots []struct {
		Name  string  `json:"name"`
		Index uint64  `json:"index"`
		Error *string `json:"error"`
	} `json:"snapshots"`
	Problems []problem `json:"problems"`
}

// copyDir copies the tree at src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestClusterNodeVerifyDumpCompare(t *testing.T) {
	t.Parallel()
	tn := newTestNodes(t, 3)
	acked := tn.write("group/g", 12)
	index := tn.settle()
	root := func(id string) string { return filepath.Join(tn.dirs[id], statestore.StoreDirName) }

	// verify, dump and compare read the nodes without changing a byte.
	listings := func() (out []string) {
		for _, p := range tn.peers {
			out = append(out, dirListing(t, root(p.ID))...)
		}
		return out
	}
	untouched := listings()
	defer func() {
		if after := listings(); !slices.Equal(untouched, after) {
			t.Errorf("reading the nodes changed them:\nbefore %v\nafter  %v", untouched, after)
		}
	}()

	t.Run("verify", func(t *testing.T) {
		for _, p := range tn.peers {
			var rep raftVerifyJSON
			code, errs := kpJSON(t, &rep, "verify", "--dir", tn.dirs[p.ID])
			if code != exitOK || !rep.OK || rep.Layout != "cluster" || len(rep.Problems) != 0 {
				t.Fatalf("verify %s: exit %d, %+v, stderr %s", p.ID, code, rep, errs)
			}
			if rep.LastIndex < index || rep.CommitFloor < index || rep.CommitFloor > rep.LastIndex || rep.Stable == nil || rep.Stable.CurrentTerm == 0 || len(rep.Snapshots) == 0 {
				t.Errorf("verify %s: last %d, commit floor %d (applied %d), stable %+v, snapshots %+v", p.ID, rep.LastIndex, rep.CommitFloor, index, rep.Stable, rep.Snapshots)
			}
		}
		code, out, _ := kp(t, "verify", "--dir", tn.dirs["n1"])
		if code != exitOK || !strings.Contains(out, "cluster node") || !strings.Contains(out, "commit floor") || !strings.Contains(out, "OK: no problems") {
			t.Errorf("verify's table: exit %d\n%s", code, out)
		}
	})

	t.Run("dump", func(t *testing.T) {
		var rep struct {
			Layout      string `json:"layout"`
			CommitFloor uint64 `json:"commit_floor"`
			Entries     []struct {
				Index   uint64 `json:"index"`
				Term    uint64 `json:"term"`
				Type    string `json:"type"`
				Size    int    `json:"size"`
				Records []struct {
					Kind string `json:"kind"`
					Key  string `json:"key"`
				} `json:"records"`
			} `json:"entries"`
			Problems []problem `json:"problems"`
		}
		code, errs := kpJSON(t, &rep, "dump", "--dir", tn.dirs["n2"])
		if code != exitOK || rep.Layout != "cluster" || rep.CommitFloor < index || len(rep.Problems) != 0 {
			t.Fatalf("dump: exit %d, layout %q, floor %d, problems %v, stderr %s", code, rep.Layout, rep.CommitFloor, rep.Problems, errs)
		}
		puts, dels, configs := map[string]bool{}, 0, 0
		for i, e := range rep.Entries {
			if i > 0 && e.Index != rep.Entries[i-1].Index+1 {
				t.Errorf("entry %d follows %d", e.Index, rep.Entries[i-1].Index)
			}
			if e.Term == 0 || e.Size == 0 && e.Type == "LogCommand" {
				t.Errorf("entry %+v", e)
			}
			if e.Type == "LogConfiguration" {
				configs++
			}
			for _, r := range e.Records {
				switch r.Kind {
				case "PUT":
					puts[r.Key] = true
				case "DELETE":
					dels++
				}
			}
		}
		if configs == 0 && rep.Entries[0].Index == 1 || dels != 4 {
			t.Errorf("dump: %d configuration entries, %d deletes (want 4)", configs, dels)
		}
		for k := range acked {
			if !puts[k] {
				t.Errorf("dump shows no PUT of %s", k)
			}
		}
		code, out, _ := kp(t, "dump", "--dir", tn.dirs["n2"], "--documents")
		if want := `"source_id":"cam-10"`; code != exitOK || !strings.Contains(out, want) {
			t.Errorf("dump --documents: exit %d, no %s in\n%s", code, want, out)
		}
		if code, _, errs := kp(t, "dump", "--dir", tn.dirs["n2"], "--config", "x.toml"); code != exitUsage || !strings.Contains(errs, "refused in cluster mode") {
			t.Errorf("dump --config on a cluster node: exit %d, %s", code, errs)
		}
		code, out, _ = kp(t, "dump", "--dir", tn.dirs["n2"], "--from", "3", "--to", "4")
		if code != exitOK || !strings.HasPrefix(out, "3\t") || !strings.Contains(out, "\n4\t") || strings.Contains(out, "\n5\t") || !strings.Contains(out, "commit floor") {
			t.Errorf("dump --from 3 --to 4: exit %d\n%s", code, out)
		}
	})

	t.Run("compare", func(t *testing.T) {
		for _, at := range []uint64{index, index - 3} {
			code, out, errs := kp(t, "compare", "--index", fmt.Sprint(at), tn.dirs["n1"], tn.dirs["n3"])
			if code != exitOK || !strings.HasPrefix(out, fmt.Sprintf("EQUAL at index %d", at)) {
				t.Errorf("compare at %d: exit %d\n%s%s", at, code, out, errs)
			}
		}
		// Beyond the logs no image can be rebuilt.
		code, _, errs := kp(t, "compare", "--index", fmt.Sprint(index+100), tn.dirs["n1"], tn.dirs["n3"])
		if code != exitUsage || !strings.Contains(errs, "cannot be rebuilt") {
			t.Errorf("compare beyond the log: exit %d, %s", code, errs)
		}
	})

	t.Run("compare_different", func(t *testing.T) {
		// Another cluster that wrote the same, but for k04's document:
		// k04 is the first difference (k05 and after differ in their
		// creation times too).
		other := newTestNodes(t, 3)
		other.write("group/g", 12, map[int]int{4: 99})
		if at := other.settle(); at != index {
			t.Fatalf("the other cluster applied %d entries, this one %d", at, index)
		}
		code, out, errs := kp(t, "compare", "--index", fmt.Sprint(index), tn.dirs["n1"], other.dirs["n2"])
		if code != exitProblems || !strings.HasPrefix(out, "DIFFERENT") || !strings.Contains(out, `key "k04": documents differ`) {
			t.Errorf("compare two clusters: exit %d\n%s%s", code, out, errs)
		}
		var rep struct {
			Equal bool    `json:"equal"`
			Key   *string `json:"key"`
		}
		if code, _ := kpJSON(t, &rep, "compare", "--index", fmt.Sprint(index), tn.dirs["n1"], other.dirs["n2"]); code != exitProblems || rep.Equal || rep.Key == nil || *rep.Key != "k04" {
			t.Errorf("compare --json: exit %d, %+v", code, rep)
		}
	})

	t.Run("single-store commands refuse", func(t *testing.T) {
		for _, args := range [][]string{{"replay"}, {"stat"}, {"repair", "--yes"}, {"checkpoint"}, {"backup", "--out", filepath.Join(t.TempDir(), "b")}} {
			before := dirListing(t, root("n1"))
			code, out, errs := kp(t, append(args, "--dir", tn.dirs["n1"])...)
			if code != exitUsage || out != "" || !strings.Contains(errs, "is a cluster node's directory") || !strings.Contains(errs, args[0]+" reads a single store's files") {
				t.Errorf("%v on a cluster node: exit %d, stdout %q, stderr %q", args, code, out, errs)
			}
			if after := dirListing(t, root("n1")); !slices.Equal(before, after) {
				t.Errorf("%v changed the node", args)
			}
		}
	})

	t.Run("damage", func(t *testing.T) {
		segs, err := listSegments(filepath.Join(root("n1"), "journal"))
		if err != nil || len(segs) == 0 {
			t.Fatalf("segments: %v, %v", segs, err)
		}
		snaps, err := listRaftSnapshots(root("n1"))
		if err != nil || len(snaps) == 0 {
			t.Fatalf("snapshots: %v, %v", snaps, err)
		}
		for _, tc := range []struct {
			name   string
			break_ func(root string)
			file   string
		}{
			{"entry", func(r string) { flipByte(t, filepath.Join(r, "journal", segs[0].Name()), 40) }, "journal/" + segs[0].Name()},
			{"stable", func(r string) { flipByte(t, filepath.Join(r, statestore.StableFileName), 6) }, statestore.StableFileName},
			{"snapshot", func(r string) {
				path := filepath.Join(r, snaps[0].file())
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				flipByte(t, path, fi.Size()-3)
			}, snaps[0].file()},
			{"log starts past the snapshot", func(r string) {
				ls, err := raftlog.Open(filepath.Join(r, "journal"), raftlog.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := ls.DeleteRange(1, snaps[0].Meta.Index+2); err != nil {
					t.Fatal(err)
				}
				if err := ls.Close(); err != nil {
					t.Fatal(err)
				}
			}, "journal"},
			{"snapshot term", func(r string) {
				// meta.json carries no checksum of its own: a wrong term
				// shows only against the log.
				path := filepath.Join(r, snapshotsDir, snaps[0].Name, "meta.json")
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				m["Term"] = m["Term"].(float64) + 5
				if b, err = json.Marshal(m); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}, snaps[0].file()},
		} {
			dir := copyDir(t, tn.dirs["n1"])
			tc.break_(filepath.Join(dir, statestore.StoreDirName))
			var rep raftVerifyJSON
			code, errs := kpJSON(t, &rep, "verify", "--dir", dir)
			if code != exitProblems || rep.OK || len(rep.Problems) == 0 {
				t.Errorf("%s damaged: exit %d, %+v, %s", tc.name, code, rep, errs)
				continue
			}
			if p := rep.Problems[0]; p.File != tc.file || p.Severity != corruption {
				t.Errorf("%s damaged: first problem %s, want CORRUPTION in %s", tc.name, p, tc.file)
			}
		}
	})
}

// A peers file listing the node alone makes a node whose two peers are
// lost a one-node cluster holding every acknowledged write.
func TestRecoverClusterAfterLosingTwoNodes(t *testing.T) {
	t.Parallel()
	tn := newTestNodes(t, 3)
	acked := tn.write("group/g", 15)
	// n3 is the survivor: it has applied everything acknowledged (with a
	// quorum of two an acknowledged write may be missing on one node, and
	// recovery is from the node holding the most).
	tn.caughtUp(tn.leader().Cluster().AppliedIndex())
	tn.stop("n1")
	tn.stop("n2")
	tn.stop("n3") // recovery runs on a stopped node
	for _, id := range []string{"n1", "n2"} {
		if err := os.RemoveAll(tn.dirs[id]); err != nil {
			t.Fatal(err)
		}
	}
	peers := filepath.Join(t.TempDir(), "peers.json")
	if err := os.WriteFile(peers, []byte(`[{"id": "n3", "address": "raft-n3"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := kp(t, "recover-cluster", "--peers", peers, tn.dirs["n3"])
	if code != exitOK || !strings.Contains(out, "recovered") {
		t.Fatalf("recover-cluster: exit %d\n%s%s", code, out, errs)
	}
	if code, out, _ := kp(t, "verify", "--dir", tn.dirs["n3"]); code != exitOK {
		t.Errorf("verify after the recovery: exit %d\n%s", code, out)
	}
	tn.net.Heal("raft-n3")
	self := []statestore.Peer{tn.peers[2]}
	s := tn.open("n3", self)
	tn.ready("n3")
	if !waitLeader(s) {
		t.Fatal("the recovered node never leads")
	}
	for k, rev := range acked {
		e, err := s.Get(ctx, admin, "group/g", k)
		if err != nil || e.Revision != rev {
			t.Errorf("%s after the recovery: %+v, %v; acknowledged at revision %d", k, e, err, rev)
		}
	}
	if _, err := s.Get(ctx, admin, "group/g", "k02"); statestore.CodeOf(err) != statestore.NotFound {
		t.Errorf("the deleted k02 after the recovery: %v", err)
	}
	if _, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: "group/g", Key: "after", Schema: schema.MediaIntentV1, Document: doc(1)}); err != nil {
		t.Errorf("a write after the recovery: %v", err)
	}
	if m, err := s.Cluster().Members(); err != nil || len(m) != 1 || m[0].ID != "n3" {
		t.Errorf("members after the recovery: %+v, %v", m, err)
	}
}

// waitLeader waits, bounded, until s admits writes.
func waitLeader(s *statestore.Store) bool {
	for range 2000 {
		if s.Cluster().IsLeader() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// recover-cluster refuses what it must not run on, changing nothing.
func TestRecoverClusterRefusals(t *testing.T) {
	t.Parallel()
	tn := newTestNodes(t, 1)
	tn.write("group/g", 3)
	dir := tn.dirs["n1"]
	good := filepath.Join(t.TempDir(), "good.json")
	if err := os.WriteFile(good, []byte(`[{"id":"n1","address":"raft-n1"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The node is open in this process: its LOCK is held.
	for _, args := range [][]string{{"recover-cluster", "--peers", good, dir}, {"compare", "--index", "1", dir, dir}, {"verify", "--dir", dir}, {"dump", "--dir", dir}} {
		code, _, errs := kp(t, args...)
		if code != exitUsage || !strings.Contains(errs, "in use") || !strings.Contains(errs, "LOCK") {
			t.Errorf("%v on a live node: exit %d, %s", args, code, errs)
		}
	}
	if err := statestore.RecoverCluster(statestore.Options{Dir: dir}, []statestore.Peer{{ID: "n1", RaftAddr: "raft-n1"}}, &replica.Raft{}); statestore.CodeOf(err) != statestore.Unavailable || !strings.Contains(err.Error(), "running process") {
		t.Errorf("RecoverCluster on a live node: %v", err)
	}
	tn.settle()
	before := dirListing(t, filepath.Join(dir, statestore.StoreDirName))
	pdir := t.TempDir()
	for _, tc := range []struct{ name, body, says string }{
		{"empty", `[]`, "empty"},
		{"object", `{"id":"n1"}`, "not a JSON list"},
		{"not JSON", `n1 raft-n1`, "not a JSON list"},
		{"no id", `[{"id":"","address":"a"}]`, "[0].id is empty"},
		{"no address", `[{"id":"n1","address":"a"},{"id":"n2"}]`, "[1].address is empty"},
		{"duplicate id", `[{"id":"n1","address":"a"},{"id":"n1","address":"b"}]`, "[1].id"},
		{"duplicate address", `[{"id":"n1","address":"a"},{"id":"n2","address":"a"}]`, "[1].address"},
		{"unknown field", `[{"id":"n1","address":"a","suffrage":"x"}]`, "suffrage"},
		{"trailing", `[{"id":"n1","address":"a"}] []`, "after the list"},
	} {
		path := filepath.Join(pdir, strings.ReplaceAll(tc.name, " ", "_")+".json")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := kp(t, "recover-cluster", "--peers", path, dir)
		if code != exitUsage || out != "" || !strings.Contains(errs, tc.says) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q, want it to say %q", tc.name, code, out, errs, tc.says)
		}
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"recover-cluster", dir}, "--peers is required"},
		{[]string{"recover-cluster", "--peers", good}, "argument"},
		{[]string{"recover-cluster", "--peers", filepath.Join(pdir, "absent.json"), dir}, "absent.json"},
		{[]string{"recover-cluster", "--peers", good, t.TempDir()}, "no store in"},
	} {
		code, _, errs := kp(t, tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.says) {
			t.Errorf("%v: exit %d, stderr %q, want it to say %q", tc.args, code, errs, tc.says)
		}
	}
	if after := dirListing(t, filepath.Join(dir, statestore.StoreDirName)); !slices.Equal(before, after) {
		t.Errorf("a refused recovery changed the node:\nbefore %v\nafter  %v", before, after)
	}
	// A single store's directory is no cluster node.
	ts := newTestStore(t)
	ts.fill(2)
	ts.close()
	if code, _, errs := kp(t, "recover-cluster", "--peers", good, ts.dir); code != exitUsage || !strings.Contains(errs, "no cluster node") {
		t.Errorf("recover-cluster on a single store: exit %d, %s", code, errs)
	}
}

// envHoldNode makes the test binary a child that opens a one-node cluster
// in the directory it names, says "ready" and holds it until stdin closes.
const envHoldNode = "KPJOURNAL_TEST_HOLD_NODE"

// holdNodeChild is the child role of TestRecoverClusterRefusesAChildsNode.
func holdNodeChild() (bool, int) {
	dir := os.Getenv(envHoldNode)
	if dir == "" {
		return false, 0
	}
	net := replica.NewInmemNetwork()
	s, err := statestore.OpenCluster(statestore.Options{Dir: dir, Schemas: schema.NewRegistry()},
		statestore.ClusterOptions{NodeID: "n1", RaftAddr: "raft-n1", RPCAddr: "rpc-n1",
			Peers:  []statestore.Peer{{ID: "n1", RaftAddr: "raft-n1", RPCAddr: "rpc-n1"}},
			Engine: &replica.Raft{Transport: net.Transport("raft-n1"), Loopback: replica.NewLoopback()}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return true, exitUsage
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	s.Close()
	return true, exitOK
}

// A node another process holds open is refused too.
func TestRecoverClusterRefusesAChildsNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHoldNode+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("the child did not open its node: %q, %v", line, err)
	}
	peers := filepath.Join(t.TempDir(), "peers.json")
	if err := os.WriteFile(peers, []byte(`[{"id":"n1","address":"raft-n1"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := kp(t, "recover-cluster", "--peers", peers, dir)
	if code != exitUsage || !strings.Contains(errs, "held by a running process") {
		t.Errorf("recover-cluster on a node another process holds: exit %d, %s", code, errs)
	}
}

// verify applies raft's rules to a log the LogStore accepts: terms never
// decrease, the current term is no older than the log's, every command
// decodes as the state machine decodes it.
func TestClusterVerifyLogRules(t *testing.T) {
	t.Parallel()
	cmd := func(data string) *raft.Log { return &raft.Log{Type: raft.LogCommand, Data: []byte(data)} }
	for _, tc := range []struct {
		name  string
		terms []uint64
		logs  []*raft.Log
		term  uint64 // raft-stable's current term
		index uint64 // the problem's index
		says  string
	}{
		{"term decreases", []uint64{2, 2, 1}, []*raft.Log{{Type: raft.LogNoop}, {Type: raft.LogNoop}, {Type: raft.LogNoop}}, 2, 3, "terms never decrease"},
		{"stable term behind", []uint64{1, 3}, []*raft.Log{{Type: raft.LogNoop}, {Type: raft.LogNoop}}, 2, 2, "older than the log's last term 3"},
		{"command does not decode", []uint64{1, 1}, []*raft.Log{{Type: raft.LogNoop}, cmd("xx")}, 1, 2, "does not decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			root := filepath.Join(dir, statestore.StoreDirName)
			ls, err := raftlog.Open(filepath.Join(root, "journal"), raftlog.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range tc.logs {
				l.Index, l.Term = uint64(i+1), tc.terms[i]
			}
			if err := ls.StoreLogs(tc.logs); err != nil {
				t.Fatal(err)
			}
			if err := ls.Close(); err != nil {
				t.Fatal(err)
			}
			st, err := raftlog.OpenStable(filepath.Join(root, statestore.StableFileName), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.SetUint64([]byte("CurrentTerm"), tc.term); err != nil {
				t.Fatal(err)
			}
			var rep raftVerifyJSON
			code, _ := kpJSON(t, &rep, "verify", "--dir", dir)
			if code != exitProblems || len(rep.Problems) != 1 || rep.Problems[0].Index != tc.index || !strings.Contains(rep.Problems[0].Reason, tc.says) {
				t.Errorf("exit %d, problems %v; want one at index %d saying %q", code, rep.Problems, tc.index, tc.says)
			}
		})
	}
}

// clusterT0 is every test cluster's start time, so two clusters that
// wrote the same build the same images.
var clusterT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
