package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/replica"
	"github.com/keeppeek/statestore/replica/raftlog"
)

// The replicated layout: a cluster node's directory (statestore.OpenCluster)
// holds raft's log in journal/ (records of kind RAFT, package
// replica/raftlog), its term and vote in raft-stable, and raft's
// FileSnapshotStore in raft-snapshots/ whose snapshot data are checkpoint
// images. verify and dump see it by raft-stable and read it without
// changing a byte; compare and recover-cluster work only on it.

// snapshotsDir is where raft's FileSnapshotStore, rooted at a node's
// raft-snapshots, keeps one directory per snapshot.
const snapshotsDir = "raft-snapshots/snapshots"

// isClusterNode reports whether the store in root is a cluster node's.
func isClusterNode(root string) bool {
	_, err := os.Stat(filepath.Join(root, statestore.StableFileName))
	return err == nil
}

// raftLimits are the decoder bounds of a raft journal: the store's, with
// an entry as large as replica/raftlog admits.
func raftLimits(chk *recovery.Checker) journal.Limits {
	lim := chk.JournalLimits()
	lim.MaxRaftEntry = raftlog.DefaultMaxEntryBytes
	return lim
}

// raftEntry is one raft log entry as the journal holds it.
type raftEntry struct {
	Index   uint64
	Segment string
	Offset  int64
	Term    uint64
	Commit  uint64 // the commit index staged when it was stored
	Type    raft.LogType
	Data    []byte // aliases the scan's buffer: valid only in the callback
}

// walkRaft walks the raft journal of the node in root from index from to
// to (0: the end), handing fn each entry and onDamage each problem of the
// frames (index continuity across segments included, as walkJournal
// checks it). It returns the persisted commit floor as the node's Open
// computes it and the last index read.
func walkRaft(root string, lim journal.Limits, from, to uint64, fn func(e *raftEntry) error, onDamage func(p problem) error) (floor journal.Floor, last uint64, err error) {
	dir := filepath.Join(root, "journal")
	segs, err := listSegments(dir)
	if err != nil {
		return floor, 0, err
	}
	marker, err := journal.LoadFloor(dir, journal.Floor{})
	if err != nil {
		return floor, 0, err
	}
	var lastCommit uint64
	var e raftEntry
	err = walkJournal(segs, lim, marker, max(from, 1), to, nil, func(seg journal.Segment, it *item, f *journal.Frame) error {
		if f.Kind != journal.KindRaft {
			return onDamage(problem{Severity: corruption, File: segFile(seg.Name()), Offset: it.offset, Index: it.index,
				Reason: fmt.Sprintf("a %s record in a raft log (the node refuses to open)", f.Kind)})
		}
		last, lastCommit = it.index, f.Raft.Commit
		e = raftEntry{Index: it.index, Segment: seg.Name(), Offset: it.offset, Term: f.Raft.Term, Commit: f.Raft.Commit,
			Type: raft.LogType(f.Raft.Type), Data: f.Raft.Data}
		return fn(&e)
	}, func(p problem, torn bool) error {
		if torn {
			p.Reason += ": torn final entry, never acknowledged (the node cuts it when it opens)"
		}
		return onDamage(p)
	})
	if err != nil {
		return floor, last, err
	}
	// raftlog.Open's floor: the newest persisted commit index (the last
	// entry's or the marker's), never above the last entry.
	floor = journal.Floor{Index: min(max(lastCommit, marker.Index), last), Source: "last entry"}
	if marker.Index >= lastCommit {
		floor.Source = marker.Source
	}
	return floor, last, nil
}

// snapMeta is one raft snapshot's meta.json, as FileSnapshotStore writes it.
type snapMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

// raftSnapshot is one snapshot found in raft-snapshots/.
type raftSnapshot struct {
	Name  string
	Meta  snapMeta
	Error error // why it does not load; nil when it does
}

// listRaftSnapshots reads every snapshot's meta.json, newest first (the
// order raft tries them in). A snapshot whose meta does not read is
// listed with its error.
func listRaftSnapshots(root string) ([]raftSnapshot, error) {
	des, err := os.ReadDir(filepath.Join(root, snapshotsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []raftSnapshot
	for _, de := range des {
		if !de.IsDir() || strings.HasSuffix(de.Name(), ".tmp") {
			continue // raft's unfinished snapshots, which it ignores and reaps
		}
		sn := raftSnapshot{Name: de.Name()}
		b, err := os.ReadFile(filepath.Join(root, snapshotsDir, de.Name(), "meta.json"))
		if err == nil {
			err = json.Unmarshal(b, &sn.Meta)
		}
		if err != nil {
			sn.Error = fmt.Errorf("meta.json: %w", err)
		}
		out = append(out, sn)
	}
	slices.SortFunc(out, func(a, b raftSnapshot) int {
		if a.Meta.Term != b.Meta.Term {
			return compareU64(b.Meta.Term, a.Meta.Term)
		}
		if a.Meta.Index != b.Meta.Index {
			return compareU64(b.Meta.Index, a.Meta.Index)
		}
		return strings.Compare(b.Name, a.Name)
	})
	return out, nil
}

func compareU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// file is the snapshot's state file, relative to the store directory.
func (sn *raftSnapshot) file() string { return filepath.Join(snapshotsDir, sn.Name, "state.bin") }

// readState reads the snapshot's data and checks it against meta.json's
// size and CRC-64, as FileSnapshotStore does when raft opens it.
func (sn *raftSnapshot) readState(root string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, sn.file()))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != sn.Meta.Size {
		return nil, fmt.Errorf("%d bytes, meta.json says %d", len(b), sn.Meta.Size)
	}
	if sum := crc64.Checksum(b, crc64.MakeTable(crc64.ECMA)); !bytes.Equal(sn.Meta.CRC, crc64Bytes(sum)) {
		return nil, fmt.Errorf("CRC-64 %x, meta.json says %x", crc64Bytes(sum), sn.Meta.CRC)
	}
	return b, nil
}

// crc64Bytes is sum as hash.Hash64.Sum writes it (big-endian), which is
// how FileSnapshotStore stores it.
func crc64Bytes(sum uint64) []byte {
	b := make([]byte, 8)
	for i := range 8 {
		b[i] = byte(sum >> (56 - 8*i))
	}
	return b
}

// stableState is what raft-stable holds that verify reports.
type stableState struct {
	CurrentTerm  uint64 `json:"current_term"`
	LastVoteTerm uint64 `json:"last_vote_term"`
	LastVoteCand string `json:"last_vote_candidate"`
}

// readStable reads raft-stable without changing it.
func readStable(root string) (stableState, error) {
	st, err := raftlog.OpenStable(filepath.Join(root, statestore.StableFileName), nil)
	if err != nil {
		return stableState{}, err
	}
	var s stableState
	if s.CurrentTerm, err = st.GetUint64([]byte("CurrentTerm")); err != nil {
		return s, err
	}
	if s.LastVoteTerm, err = st.GetUint64([]byte("LastVoteTerm")); err != nil {
		return s, err
	}
	cand, err := st.Get([]byte("LastVoteCand"))
	s.LastVoteCand = string(cand)
	return s, err
}

// raftImage is a node's state rebuilt at one raft index.
type raftImage struct {
	rp       *statestore.ClusterReplay
	snapshot string // the snapshot it started from, "" for none
}

// rebuildImage rebuilds the state of the node in root at raft index at:
// the newest snapshot at or below it that loads, then the log's entries
// up to at, through the store's own state machine.
func rebuildImage(root string, opts statestore.Options, lim journal.Limits, at uint64) (*raftImage, error) {
	rp, err := statestore.NewClusterReplay(opts)
	if err != nil {
		return nil, err
	}
	img := &raftImage{rp: rp}
	snaps, err := listRaftSnapshots(root)
	if err != nil {
		return nil, err
	}
	var base uint64
	for i := range snaps {
		sn := &snaps[i]
		if sn.Error != nil || sn.Meta.Index > at || sn.Meta.Index < base {
			continue
		}
		b, err := sn.readState(root)
		if err == nil {
			err = rp.Restore(bytes.NewReader(b))
		}
		if err != nil {
			continue // raft falls back to an older snapshot too
		}
		// Newest first: the first that loads is the base.
		base, img.snapshot = sn.Meta.Index, sn.Name
		break
	}
	next := base + 1
	var walkErr error
	if at > base {
		_, _, walkErr = walkRaft(root, lim, next, at, func(e *raftEntry) error {
			if e.Index != next {
				return fmt.Errorf("the log holds index %d where %d was expected (the snapshot reaches %d)", e.Index, next, base)
			}
			next++
			l := raft.Log{Index: e.Index, Term: e.Term, Type: e.Type, Data: bytes.Clone(e.Data)}
			// A refused entry leaves the state as it leaves it on every
			// node, so the walk goes on.
			_ = rp.Apply(replica.EntryOf(&l))
			return nil
		}, func(p problem) error { return fmt.Errorf("%s", p) })
	}
	if walkErr != nil {
		return nil, walkErr
	}
	if next <= at {
		return nil, fmt.Errorf("index %d cannot be rebuilt: the newest usable snapshot at or below it reaches %d and the log continues it only to %d", at, base, next-1)
	}
	return img, nil
}
