package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/replica/raftlog"
)

// raftVerifyReport is verify's report on a cluster node; it is also the
// --json document.
type raftVerifyReport struct {
	Store       string           `json:"store"`
	Layout      string           `json:"layout"` // "cluster"
	OK          bool             `json:"ok"`
	FirstIndex  uint64           `json:"first_index"` // 0 when the log is empty
	LastIndex   uint64           `json:"last_index"`
	Entries     int              `json:"entries"`
	LastTerm    uint64           `json:"last_term"`
	CommitFloor uint64           `json:"commit_floor"`
	Stable      opt[stableState] `json:"stable"` // null when raft-stable does not read
	Snapshots   []snapVerdict    `json:"snapshots"`
	Problems    []problem        `json:"problems"`
}

type snapVerdict struct {
	Name  string      `json:"name"`
	Index uint64      `json:"index"`
	Term  uint64      `json:"term"`
	Size  int64       `json:"size"`
	Error opt[string] `json:"error"` // why it does not load; null when it does
}

// verifyCluster is verify on a cluster node: every entry's frame and
// CRC-32C, index continuity, terms never decreasing, every store command
// decoding as the state machine decodes it, the persisted commit floor
// within the log, raft-stable's checksum and a term no older than the
// log's, and each snapshot's data against its meta.json and the log.
func verifyCluster(c *cli, stdout io.Writer) int {
	root := c.root()
	rep := raftVerifyReport{Store: root, Layout: "cluster", Snapshots: []snapVerdict{}, Problems: []problem{}}
	add := func(p problem) { rep.Problems = append(rep.Problems, p) }
	lim := raftLimits(c.chk)
	snaps, err := listRaftSnapshots(root)
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	// The log's term at each snapshot's index, for the snapshots' check.
	terms := map[uint64]uint64{}
	for _, sn := range snaps {
		terms[sn.Meta.Index] = 0
	}
	var prevIndex, prevTerm uint64
	floor, last, err := walkRaft(root, lim, 1, 0, func(e *raftEntry) error {
		file := segFile(e.Segment)
		if rep.FirstIndex == 0 {
			rep.FirstIndex = e.Index
		} else if e.Index != prevIndex+1 {
			add(problem{Severity: corruption, File: file, Offset: e.Offset, Index: e.Index,
				Reason: fmt.Sprintf("entry %d follows entry %d: the log has a gap", e.Index, prevIndex)})
		}
		if e.Term < prevTerm {
			add(problem{Severity: corruption, File: file, Offset: e.Offset, Index: e.Index,
				Reason: fmt.Sprintf("term %d after term %d at index %d: terms never decrease in a raft log", e.Term, prevTerm, prevIndex)})
		}
		if e.Type == raft.LogCommand {
			if _, err := statestore.DecodeRaftEntry(e.Index, e.Data, c.chk.JournalLimits()); err != nil {
				add(problem{Severity: corruption, File: file, Offset: e.Offset, Index: e.Index,
					Reason: fmt.Sprintf("the store command does not decode: %v", err)})
			}
		}
		if _, ok := terms[e.Index]; ok {
			terms[e.Index] = e.Term
		}
		prevIndex, prevTerm = e.Index, e.Term
		rep.Entries++
		return nil
	}, func(p problem) error { add(p); return nil })
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	rep.LastIndex, rep.LastTerm, rep.CommitFloor = last, prevTerm, floor.Index
	marker, err := journal.ReadFloor(filepath.Join(root, "journal"))
	switch {
	case err != nil:
		add(problem{Severity: corruption, File: filepath.Join("journal", journal.FloorFile), Offset: -1, Reason: err.Error()})
	case marker.Index > last && rep.Entries > 0:
		add(problem{Severity: corruption, File: "journal", Offset: -1, Index: marker.Index,
			Reason: fmt.Sprintf("entries up to %d were committed (%s) but the log ends at %d", marker.Index, marker.Source, last)})
	}
	st, err := readStable(root)
	if err != nil {
		p := problem{Severity: corruption, File: statestore.StableFileName, Offset: -1, Reason: err.Error()}
		var se *raftlog.StableCorruptError
		if errors.As(err, &se) {
			p.Offset = se.Offset
		}
		add(p)
	} else {
		rep.Stable = some(st)
		if st.CurrentTerm < rep.LastTerm {
			add(problem{Severity: corruption, File: statestore.StableFileName, Offset: -1, Index: last,
				Reason: fmt.Sprintf("current term %d is older than the log's last term %d", st.CurrentTerm, rep.LastTerm)})
		}
	}
	newest := uint64(0)
	for i := range snaps {
		sn := &snaps[i]
		v := snapVerdict{Name: sn.Name, Index: sn.Meta.Index, Term: sn.Meta.Term, Size: sn.Meta.Size}
		err := sn.Error
		if err == nil {
			err = checkSnapshot(c, root, sn, terms)
		}
		if err != nil {
			v.Error = some(err.Error())
			add(problem{Severity: corruption, File: sn.file(), Offset: -1, Index: sn.Meta.Index, Reason: err.Error()})
		} else {
			newest = max(newest, sn.Meta.Index)
		}
		rep.Snapshots = append(rep.Snapshots, v)
	}
	if rep.FirstIndex > 1 && newest+1 < rep.FirstIndex {
		add(problem{Severity: corruption, File: "journal", Offset: -1, Index: rep.FirstIndex,
			Reason: fmt.Sprintf("the log starts at %d but the newest snapshot that loads reaches only %d: entries %d..%d are nowhere", rep.FirstIndex, newest, newest+1, rep.FirstIndex-1)})
	}
	rep.OK = len(rep.Problems) == 0
	return c.finish(stdout, rep, rep.print, len(rep.Problems))
}

// checkSnapshot checks a snapshot's data (size, CRC-64, the checkpoint
// image with every rule a restore applies) and its place against the log:
// the image's index is at most meta.json's, and an entry (terms: 0 when
// the log does not hold it) the log holds at that
// index has the snapshot's term.
func checkSnapshot(c *cli, root string, sn *raftSnapshot, terms map[uint64]uint64) error {
	b, err := sn.readState(root)
	if err != nil {
		return err
	}
	hdr, _, err := c.chk.DecodeBackup(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("the image does not load: %w", err)
	}
	// The image's index is the last store command applied, so the
	// entries after it up to the snapshot's (configuration changes,
	// no-ops) leave it behind, never ahead.
	if hdr.Index > sn.Meta.Index {
		return fmt.Errorf("the image reflects index %d, beyond the snapshot's %d in meta.json", hdr.Index, sn.Meta.Index)
	}
	if t := terms[sn.Meta.Index]; t != 0 && t != sn.Meta.Term {
		return fmt.Errorf("meta.json gives index %d term %d, the log holds it at term %d", sn.Meta.Index, sn.Meta.Term, t)
	}
	return nil
}

func (r *raftVerifyReport) print(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "cluster node %s\n", r.Store)
	fmt.Fprintf(bw, "raft log: %d entries", r.Entries)
	if r.Entries > 0 {
		fmt.Fprintf(bw, ", index %d..%d, last term %d", r.FirstIndex, r.LastIndex, r.LastTerm)
	}
	fmt.Fprintf(bw, ", commit floor %d\n", r.CommitFloor)
	if st, ok := r.Stable.get(); ok {
		fmt.Fprintf(bw, "raft-stable: current term %d, last vote term %d for %q\n", st.CurrentTerm, st.LastVoteTerm, st.LastVoteCand)
	}
	for _, s := range r.Snapshots {
		status := "ok"
		if e, bad := s.Error.get(); bad {
			status = e
		}
		fmt.Fprintf(bw, "snapshot %s: index %d term %d, %d bytes: %s\n", s.Name, s.Index, s.Term, s.Size, status)
	}
	if len(r.Problems) == 0 {
		fmt.Fprintln(bw, "OK: no problems")
	} else {
		fmt.Fprintf(bw, "%d problems:\n", len(r.Problems))
		for _, p := range r.Problems {
			fmt.Fprintf(bw, "  %s\n", p)
		}
	}
	return bw.Flush()
}

// raftDumpEntry is one entry in dump's --json output on a cluster node.
type raftDumpEntry struct {
	Index   uint64           `json:"index"`
	Segment string           `json:"segment"`
	Offset  int64            `json:"offset"`
	Term    uint64           `json:"term"`
	Type    string           `json:"type"`
	Size    int              `json:"size"`
	Commit  uint64           `json:"commit"`
	Records []raftDumpRecord `json:"records"` // the store command's records; [] for other types
	Error   opt[string]      `json:"error"`   // why the command does not decode
}

type raftDumpRecord struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Revision  uint64 `json:"revision"`
	TimeMs    int64  `json:"time_ms"`
	Size      int    `json:"document_size"`
	// Document is a PUT's document under --documents, null otherwise.
	Document opt[json.RawMessage] `json:"document"`
}

// dumpCluster is dump on a cluster node: each entry with its term, type,
// size and staged commit index, a store command's records decoded, then
// the persisted commit floor.
func dumpCluster(c *cli, stdout, stderr io.Writer, from, to uint64, docs bool) int {
	bw := bufio.NewWriterSize(stdout, 64<<10)
	var entries []raftDumpEntry
	problems := []problem{}
	floor, _, err := walkRaft(c.root(), raftLimits(c.chk), max(from, 1), to, func(e *raftEntry) error {
		d := raftDumpEntry{Index: e.Index, Segment: e.Segment, Offset: e.Offset, Term: e.Term, Type: e.Type.String(),
			Size: len(e.Data), Commit: e.Commit, Records: []raftDumpRecord{}}
		if e.Type == raft.LogCommand {
			recs, err := statestore.DecodeRaftEntry(e.Index, e.Data, c.chk.JournalLimits())
			if err != nil {
				d.Error = some(err.Error())
				p := problem{Severity: corruption, File: segFile(e.Segment), Offset: e.Offset, Index: e.Index, Reason: err.Error()}
				problems = append(problems, p)
				fmt.Fprintf(stderr, "kpjournal dump: %s\n", p)
			}
			for _, r := range recs {
				dr := raftDumpRecord{Kind: r.Kind.String(), Namespace: r.Namespace, Key: r.Key,
					Revision: r.Revision, TimeMs: r.TimeMs, Size: len(r.Document)}
				if docs && r.Kind == journal.KindPut {
					dr.Document = some(documentJSON(r.Document))
				}
				d.Records = append(d.Records, dr)
			}
		}
		if c.json {
			entries = append(entries, d)
			return nil
		}
		fmt.Fprintf(bw, "%d\t%s@%d\tterm %d\t%s\t%d bytes\tcommit %d\n", d.Index, d.Segment, d.Offset, d.Term, d.Type, d.Size, d.Commit)
		for _, r := range d.Records {
			fmt.Fprintf(bw, "\t%s\t%s\t%s\trev %d\t%s\t%d bytes", r.Kind, r.Namespace, r.Key, r.Revision, msTime(r.TimeMs), r.Size)
			if doc, ok := r.Document.get(); ok {
				fmt.Fprintf(bw, "\t%s", doc)
			}
			fmt.Fprintln(bw)
		}
		return nil
	}, func(p problem) error {
		problems = append(problems, p)
		fmt.Fprintf(stderr, "kpjournal dump: %s\n", p)
		return nil
	})
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if c.json {
		if entries == nil {
			entries = []raftDumpEntry{}
		}
		err = writeJSON(bw, struct {
			Layout      string          `json:"layout"`
			CommitFloor uint64          `json:"commit_floor"`
			Entries     []raftDumpEntry `json:"entries"`
			Problems    []problem       `json:"problems"`
		}{"cluster", floor.Index, entries, problems})
	} else {
		_, err = fmt.Fprintf(bw, "commit floor %d (%s)\n", floor.Index, floor.Source)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if len(problems) > 0 {
		return exitProblems
	}
	return exitOK
}

const compareAbout = `Rebuilds the state of two stopped cluster nodes at one raft index and compares them. Each
node's image is its newest snapshot at or below --index that loads, then its log's entries up to
--index, applied by the store's own raft state machine (the code a running node applies them with).
DIR1 and DIR2 are media server storage directories (each node is DIR/state-store); neither is
changed, and one a running process holds (its LOCK) is refused. Prints EQUAL, or DIFFERENT with the
first key (in namespace and key order) whose entry differs or exists on one node only. Exit code 1
when the images differ.`

func runCompare(args []string, stdout, stderr io.Writer) int {
	c := newCLI("compare", "--index N [flags] DIR1 DIR2", compareAbout, []string{
		"kpjournal compare --index 1200 /srv/node1 /srv/node2",
		"kpjournal compare --index 1200 /srv/node1 /srv/node2 --json",
	}, stdout, stderr)
	c.jsonFlag()
	c.limitFlags()
	index := c.FS.Uint64("index", 0, "the raft index to compare the nodes at (required)")
	if code := c.parseN(args, 2); code >= 0 {
		return code
	}
	if *index == 0 {
		return c.UsageError("--index is required")
	}
	dirs := c.FS.Args()
	type side struct {
		v    *materialize.View
		from string
	}
	var sides [2]side
	for i, d := range dirs {
		c.dir, c.dirArg, c.clusterOK = d, true, true
		if code := c.openStoreDir(); code >= 0 {
			return code
		}
		if !isClusterNode(c.root()) {
			return c.Fail(exitUsage, "%s holds no cluster node (no %s)", c.root(), statestore.StableFileName)
		}
		img, err := rebuildImage(c.root(), statestore.Options{Dir: d, Limits: c.limits, Schemas: c.reg}, raftLimits(c.chk), *index)
		if err != nil {
			return c.Fail(exitUsage, "%s: %v", d, err)
		}
		sides[i] = side{v: img.rp.View(), from: img.snapshot}
	}
	diff := firstDifference(sides[0].v, sides[1].v)
	rep := struct {
		Index     uint64      `json:"index"`
		Equal     bool        `json:"equal"`
		Namespace opt[string] `json:"namespace"`
		Key       opt[string] `json:"key"`
		Reason    opt[string] `json:"reason"`
		// Snapshots are the snapshot each image started from ("" for
		// none: the log from index 1).
		Snapshots [2]string `json:"snapshots"`
	}{Index: *index, Equal: diff == nil, Snapshots: [2]string{sides[0].from, sides[1].from}}
	if diff != nil {
		rep.Namespace, rep.Key, rep.Reason = some(diff.ns), someIf(diff.key, diff.key != ""), some(diff.reason)
	}
	problems := 0
	if diff != nil {
		problems = 1
	}
	return c.finish(stdout, rep, func(w io.Writer) error {
		if diff == nil {
			_, err := fmt.Fprintf(w, "EQUAL at index %d: %s and %s\n", *index, dirs[0], dirs[1])
			return err
		}
		_, err := fmt.Fprintf(w, "DIFFERENT at index %d: %s\n", *index, diff)
		return err
	}, problems)
}

// difference is the first place two images differ.
type difference struct {
	ns, key string // key "" for a namespace's own counters
	reason  string
}

func (d *difference) String() string {
	if d.key == "" {
		return fmt.Sprintf("namespace %q: %s", d.ns, d.reason)
	}
	return fmt.Sprintf("namespace %q key %q: %s", d.ns, d.key, d.reason)
}

// firstDifference compares a and b entry by entry in namespace and key
// order, then the namespaces' revisions; nil when they are equal.
func firstDifference(a, b *materialize.View) *difference {
	var ea, eb []*materialize.Entry
	a.All(func(e *materialize.Entry) bool { ea = append(ea, e); return true })
	b.All(func(e *materialize.Entry) bool { eb = append(eb, e); return true })
	for i := 0; i < len(ea) || i < len(eb); i++ {
		switch {
		case i >= len(eb):
			return &difference{ea[i].Namespace, ea[i].Key, "only the first node holds it"}
		case i >= len(ea):
			return &difference{eb[i].Namespace, eb[i].Key, "only the second node holds it"}
		}
		x, y := ea[i], eb[i]
		if x.Namespace != y.Namespace || x.Key != y.Key {
			if x.Namespace < y.Namespace || (x.Namespace == y.Namespace && x.Key < y.Key) {
				return &difference{x.Namespace, x.Key, "only the first node holds it"}
			}
			return &difference{y.Namespace, y.Key, "only the second node holds it"}
		}
		if r := entryDiff(x, y); r != "" {
			return &difference{x.Namespace, x.Key, r}
		}
	}
	na, nb := map[string]materialize.Namespace{}, map[string]materialize.Namespace{}
	a.Namespaces(func(name string, n materialize.Namespace) bool { na[name] = n; return true })
	b.Namespaces(func(name string, n materialize.Namespace) bool { nb[name] = n; return true })
	for name, n := range na {
		if m, ok := nb[name]; !ok || m.Revision != n.Revision {
			return &difference{name, "", fmt.Sprintf("revision %d on the first node, %d on the second", n.Revision, m.Revision)}
		}
	}
	for name, m := range nb {
		if _, ok := na[name]; !ok {
			return &difference{name, "", fmt.Sprintf("revision 0 on the first node, %d on the second", m.Revision)}
		}
	}
	return nil
}

// entryDiff names the first field in which x and y differ, "" if none.
func entryDiff(x, y *materialize.Entry) string {
	switch {
	case x.Revision != y.Revision:
		return fmt.Sprintf("revision %d on the first node, %d on the second", x.Revision, y.Revision)
	case !bytes.Equal(x.Document, y.Document):
		return fmt.Sprintf("documents differ (%d and %d bytes)", len(x.Document), len(y.Document))
	case x.Schema != y.Schema:
		return fmt.Sprintf("schema %q and %q", x.Schema, y.Schema)
	case x.Owner != y.Owner:
		return fmt.Sprintf("owner %q and %q", x.Owner, y.Owner)
	case x.ExpiresMs != y.ExpiresMs:
		return fmt.Sprintf("lease deadline %d and %d", x.ExpiresMs, y.ExpiresMs)
	case x.CreatedMs != y.CreatedMs || x.UpdatedMs != y.UpdatedMs:
		return fmt.Sprintf("created/updated %d/%d and %d/%d", x.CreatedMs, x.UpdatedMs, y.CreatedMs, y.UpdatedMs)
	}
	return ""
}

const recoverAbout = `The documented recovery for a cluster that lost its quorum (a majority of its nodes is gone for
good), run on a stopped node: raft's RecoverCluster with the node's own log, raft-stable and
snapshots and the store's state machine. Every entry the node holds is applied, a snapshot of the
result is written carrying the configuration from --peers as the only members, and the log is
emptied. DIR is the node's media server storage directory (the node is DIR/state-store). It refuses
while a running process holds the node's LOCK, a directory that holds no cluster node, and a peers
file that is not a JSON list of {"id": ..., "address": ...} objects with unique, non-empty IDs and
raft addresses (the error names the field).

Procedure: stop every surviving node. Pick the survivors to keep (the one with the highest last
index, see kpjournal verify, holds every acknowledged write; with one survivor, that one). Write one
peers file listing exactly them with their node IDs and raft addresses, and run recover-cluster with
that same file on each of them. Start them again with kpstate serve, their [cluster] peers listing
the same members. Writes acknowledged by the old cluster that reached none of the survivors are lost:
recover from the node with the longest log. Grow the cluster again with kpstate cluster add-voter.`

// peerFileEntry is one member in a peers file, as raft's peers.json
// (version 3) spells it.
type peerFileEntry struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

// readPeersFile reads a peers file, refusing what raft would refuse and
// naming the field.
func readPeersFile(path string) ([]statestore.Peer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var list []peerFileEntry
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("%s: not a JSON list of {\"id\", \"address\"} objects: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the list", path)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: the list is empty: a cluster needs at least one voter", path)
	}
	ids, addrs := map[string]int{}, map[string]int{}
	var peers []statestore.Peer
	for i, p := range list {
		switch {
		case p.ID == "":
			return nil, fmt.Errorf("%s: [%d].id is empty", path, i)
		case p.Address == "":
			return nil, fmt.Errorf("%s: [%d].address is empty (peer %q)", path, i, p.ID)
		}
		if j, dup := ids[p.ID]; dup {
			return nil, fmt.Errorf("%s: [%d].id %q is [%d].id too", path, i, p.ID, j)
		}
		if j, dup := addrs[p.Address]; dup {
			return nil, fmt.Errorf("%s: [%d].address %q is [%d].address too", path, i, p.Address, j)
		}
		ids[p.ID], addrs[p.Address] = i, i
		peers = append(peers, statestore.Peer{ID: p.ID, RaftAddr: p.Address})
	}
	return peers, nil
}

func runRecoverCluster(args []string, stdout, stderr io.Writer) int {
	c := newCLI("recover-cluster", "--peers FILE [flags] DIR", recoverAbout, []string{
		"kpjournal recover-cluster --peers peers.json /var/lib/keeppeek",
		`echo '[{"id": "n1", "address": "10.0.0.1:7000"}]' > peers.json`,
	}, stdout, stderr)
	c.jsonFlag()
	c.limitFlags()
	peersFile := c.FS.String("peers", "", `the new configuration: a JSON list of {"id": ..., "address": RAFT_ADDR} (required)`)
	if code := c.parseN(args, 1); code >= 0 {
		return code
	}
	if *peersFile == "" {
		return c.UsageError("--peers is required")
	}
	c.dir, c.dirArg, c.clusterOK = c.FS.Arg(0), true, true
	if code := c.openStoreDir(); code >= 0 {
		return code
	}
	if !isClusterNode(c.root()) {
		return c.Fail(exitUsage, "%s holds no cluster node (no %s): recover-cluster works on a cluster node's directory", c.root(), statestore.StableFileName)
	}
	peers, err := readPeersFile(*peersFile)
	if err != nil {
		return c.Fail(exitUsage, "--peers %v", err)
	}
	if err := statestore.RecoverCluster(statestore.Options{Dir: c.dir, Limits: c.limits, Schemas: c.reg}, peers, &replica.Raft{}); err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	rep := struct {
		Store  string   `json:"store"`
		Voters []string `json:"voters"`
	}{Store: c.root()}
	for _, p := range peers {
		rep.Voters = append(rep.Voters, p.ID+"="+p.RaftAddr)
	}
	return c.finish(stdout, rep, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "recovered %s as a cluster of %s; start it with [cluster] peers listing exactly these members\n",
			c.root(), strings.Join(rep.Voters, ", "))
		return err
	}, 0)
}
