package statestore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/replica/consensus"
)

// A raft entry of the store is one group-commit batch: entryMagic, the
// version, a uvarint count and then each record as a uvarint length and
// its journal frame (with its own CRC-32C), so every node decodes exactly
// what the leader admitted and checks it as replay checks the journal.
const (
	entryMagic   = 'K'
	entryVersion = 1
)

// encodeEntry frames recs as one raft entry.
func encodeEntry(recs []*journal.Record) ([]byte, error) {
	size := 2 + binary.MaxVarintLen64
	for _, r := range recs {
		size += binary.MaxVarintLen64 + r.EncodedSize()
	}
	out := append(make([]byte, 0, size), entryMagic, entryVersion)
	out = binary.AppendUvarint(out, uint64(len(recs)))
	for i, r := range recs {
		out = binary.AppendUvarint(out, uint64(r.EncodedSize()))
		var err error
		if out, err = r.AppendFrame(out); err != nil {
			return nil, fmt.Errorf("record %d of the batch: %w", i, err)
		}
	}
	return out, nil
}

// EntryError is a raft entry that does not decode, naming the raft index
// and the byte offset.
type EntryError struct {
	Index  uint64
	Offset int
	Reason string
	Err    error
}

// Error names the index, the offset and what is wrong.
func (e *EntryError) Error() string {
	return fmt.Sprintf("raft entry %d at byte %d: %s", e.Index, e.Offset, e.Reason)
}

// Unwrap returns the record's decoding error, if that was the cause.
func (e *EntryError) Unwrap() error { return e.Err }

// decodeEntry decodes the records of the raft entry at index.
func decodeEntry(index uint64, data []byte, lim journal.Limits) ([]*journal.Record, error) {
	if len(data) < 2 || data[0] != entryMagic || data[1] != entryVersion {
		return nil, &EntryError{Index: index, Reason: "not a store batch of version 1"}
	}
	off := 2
	n, w := binary.Uvarint(data[off:])
	if w <= 0 || n > uint64(len(data)) {
		return nil, &EntryError{Index: index, Offset: off, Reason: "bad record count"}
	}
	off += w
	recs := make([]*journal.Record, 0, n)
	for i := range n {
		l, w := binary.Uvarint(data[off:])
		if w <= 0 || l > uint64(len(data)-off-w) {
			return nil, &EntryError{Index: index, Offset: off, Reason: fmt.Sprintf("bad length of record %d", i)}
		}
		off += w
		rec, err := journal.Decode(data[off:off+int(l)], lim)
		if err != nil {
			return nil, &EntryError{Index: index, Offset: off, Reason: fmt.Sprintf("record %d: %v", i, err), Err: err}
		}
		recs = append(recs, rec)
		off += int(l)
	}
	if off != len(data) {
		return nil, &EntryError{Index: index, Offset: off, Reason: "bytes after the last record"}
	}
	return recs, nil
}

// fsm is the store as raft's state machine, on every node: each entry is
// checked record by record with the replay checks (recovery.Checker) on a
// clone of the published view, then published with its watch updates as
// one step. An entry that fails is refused whole on every node alike (the
// same state, the same checks), so the nodes never diverge and the leader
// answers its ops as not applied. No clock is read: records carry the
// leader's time.
type fsm struct {
	s *Store

	mu      sync.Mutex
	applied uint64 // raft index of the last entry applied
	// fed is the raft index of the last entry (or snapshot) raft handed
	// the state machine: below applied only while raft replays entries
	// after a Restore that kept this node's newer state, when a snapshot
	// raft took would be labelled with fed but hold applied (Snapshot
	// refuses then).
	fed     uint64
	timeMs  int64         // the latest record time applied
	changed chan struct{} // closed and replaced whenever applied moves
}

// Apply applies one committed entry.
func (f *fsm) Apply(l *consensus.Entry) any {
	if f.feed(l.Index) {
		// Already applied: raft replays the entries after a snapshot
		// Restore kept this node's newer state from (see Restore).
		return nil
	}
	if l.Type != consensus.EntryCommand {
		f.advance(l.Index, 0)
		return nil
	}
	t, err := f.apply(l.Index, l.Data)
	f.advance(l.Index, t)
	if err != nil {
		f.s.log.Error("state store: replicated batch refused", "index", l.Index, "err", err)
		return err
	}
	return nil
}

func (f *fsm) apply(index uint64, data []byte) (int64, error) {
	s := f.s
	recs, err := decodeEntry(index, data, s.chk.JournalLimits())
	if err != nil {
		return 0, err
	}
	jb := s.home
	v := jb.published().Clone()
	b := &batch{view: v}
	var t int64
	for i, rec := range recs {
		if err := s.chk.Check(v, index, rec); err != nil {
			return 0, fmt.Errorf("record %d of the batch at raft index %d: %w", i, index, err)
		}
		e, err := v.Apply(rec)
		if err != nil {
			return 0, fmt.Errorf("record %d of the batch at raft index %d: %w", i, index, err)
		}
		b.recs, b.entries = append(b.recs, rec), append(b.entries, e)
		b.leases = b.leases || rec.ExpiresMs != 0 || rec.Kind == journal.KindExpire
		t = max(t, rec.TimeMs)
	}
	events := b.events()
	jb.pubMu.Lock()
	jb.view.Store(v)
	jb.index = index
	if jb.watches != nil {
		jb.watches.Publish(events)
	}
	jb.pubMu.Unlock()
	if b.leases && s.leases != nil {
		s.leases.poke()
	}
	return t, nil
}

// feed records that raft handed the entry at index to the state
// machine, and reports whether it was applied already.
func (f *fsm) feed(index uint64) (done bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fed = max(f.fed, index)
	return index <= f.applied
}

// restored records that raft restored a snapshot of index, and reports
// whether this node applied past it: raft's own applied index is then
// the snapshot's, whatever came before.
func (f *fsm) restored(index uint64) (behind bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fed = index
	return index <= f.applied
}

// advance records that index was applied.
func (f *fsm) advance(index uint64, timeMs int64) {
	f.mu.Lock()
	f.applied = max(f.applied, index)
	f.timeMs = max(f.timeMs, timeMs)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *fsm) appliedIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func (f *fsm) lastTime() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timeMs
}

// progress returns the applied index and a channel closed when it moves.
func (f *fsm) progress() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied, f.changed
}

// Snapshot captures the published view: O(1), the view is immutable.
func (f *fsm) Snapshot() (consensus.Snapshot, error) {
	f.mu.Lock()
	fed, applied := f.fed, f.applied
	f.mu.Unlock()
	if fed < applied {
		// Raft would label the image with fed: retried at its next
		// snapshot interval, once the replay reached applied.
		return nil, fmt.Errorf("state store: no snapshot while raft replays entries up to %d this node applied (at %d)", applied, fed)
	}
	v, idx := f.s.home.snapshot()
	sn := &fsmSnapshot{v: v, index: idx, timeMs: f.lastTime()}
	if c := f.s.cluster; c != nil {
		sn.taken = &c.prog.taken
	}
	return sn, nil
}

// Restore replaces the state with a snapshot (a checkpoint image), checked
// as a backup is, and closes every watch on this node with RESTORED. A
// snapshot at or below the index this node has applied is not restored:
// raft sends a follower whose log it could not match the leader's newest
// snapshot, which may be older than what the follower applied (a node
// whose log raft walked back to the leader's first entry); both are
// committed state, the node's the longer, so going back to the snapshot
// would only re-deliver to its watches, after a re-snapshot at an older
// revision, updates they already had. Apply then skips the entries raft
// replays up to the applied index.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	hdr, v, err := f.s.chk.DecodeBackup(rc)
	if err != nil {
		return fmt.Errorf("raft snapshot: %w", err)
	}
	if f.restored(hdr.Index) {
		f.s.log.Info("state store: raft snapshot not restored: this node applied past it", "snapshot", hdr.Index, "applied", f.appliedIndex())
		return nil
	}
	// Counted before the watches learn of it (replace closes them).
	if c := f.s.cluster; c != nil && c.prog.live.Load() {
		c.prog.installed.Add(1)
	}
	f.s.home.replace(v, hdr.Index)
	f.advance(hdr.Index, hdr.TimeMs)
	if f.s.leases != nil {
		f.s.leases.poke()
	}
	return nil
}

// fsmSnapshot is a raft snapshot: the checkpoint image of one view.
type fsmSnapshot struct {
	v      *materialize.View
	index  uint64
	timeMs int64
	taken  *atomic.Uint64 // counts the snapshots persisted (Cluster.Stats)
}

// Persist writes the checkpoint image of the view to w.
func (sn *fsmSnapshot) Persist(w io.Writer) error {
	_, err := checkpoint.Encode(w, sn.v, sn.index, sn.timeMs)
	return err
}

// Persisted counts the snapshot once the engine made it durable.
func (sn *fsmSnapshot) Persisted() {
	if sn.taken != nil {
		sn.taken.Add(1)
	}
}

// Release has nothing to free: the view is garbage once unreferenced.
func (sn *fsmSnapshot) Release() {}

// raftLog is raft as the pipeline's log: Write proposes one batch as one
// entry without waiting, Sync waits for the futures in order; each batch
// keeps its own outcome.
type raftLog struct {
	c        *clusterNode
	mu       sync.Mutex
	futures  map[uint64]consensus.Future // by the batch's last pipeline index
	outcomes map[uint64]error
	durable  uint64
}

func (l *raftLog) Write(recs []*journal.Record, first uint64) error {
	data, err := encodeEntry(recs)
	if err != nil {
		return err
	}
	f := l.c.node.Apply(data, l.c.wait)
	l.mu.Lock()
	l.futures[first+uint64(len(recs))-1] = f
	l.mu.Unlock()
	return nil
}

func (l *raftLog) Sync(upTo uint64, _ bool) error {
	l.mu.Lock()
	var keys []uint64
	for k := range l.futures {
		if k <= upTo {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	fs := make([]consensus.Future, len(keys))
	for i, k := range keys {
		fs[i] = l.futures[k]
		delete(l.futures, k)
	}
	l.mu.Unlock()
	for i, f := range fs {
		err := raftOutcome(f)
		l.mu.Lock()
		l.outcomes[keys[i]] = err
		if err == nil {
			l.durable = max(l.durable, keys[i])
		}
		l.mu.Unlock()
	}
	return nil
}

func (l *raftLog) Outcome(last uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err, ok := l.outcomes[last]
	if !ok {
		return newErr(Storage, "raft", "internal: no outcome for the batch ending at %d", last)
	}
	delete(l.outcomes, last)
	return err
}

func (l *raftLog) NotApplied() error {
	return notApplied("judged against a batch that failed to commit")
}

func (l *raftLog) Durable() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

func (l *raftLog) Poll() {}

// raftOutcome maps an Apply future's end to the store's answer, by the
// outcome the engine marked its error with (consensus.ErrNotLeader,
// consensus.ErrOutcomeUnknown).
func raftOutcome(f consensus.Future) error {
	err := f.Error()
	if err == nil {
		if rerr, ok := f.Response().(error); ok && rerr != nil {
			return notApplied("the state machine refused the batch at raft index %d: %v", f.Index(), rerr)
		}
		return nil
	}
	switch {
	case errors.Is(err, consensus.ErrNotLeader):
		return notApplied("%v", err)
	case errors.Is(err, consensus.ErrOutcomeUnknown):
		return &Error{Code: Unavailable, Field: "commit", Message: "leadership was lost before the batch was known committed: the outcome is unknown (" + err.Error() + ")", Err: err}
	}
	return &Error{Code: Storage, Field: "raft log", Message: err.Error(), Err: err}
}

// The forwarding protocol between nodes: one request, one answer, in the
// binary form of cluster_codec.go (JSON for the rare calls).
const (
	verbPut       = "put"
	verbDelete    = "delete"
	verbExpire    = "expire"
	verbReadIndex = "readindex"
	// verbStarting is never sent: handle answers every call with it
	// until raft has started on this node.
	verbStarting = "starting"
)

type fwdPrincipal struct {
	ID     string `json:"id"`
	Admin  bool   `json:"admin,omitempty"`
	System bool   `json:"system,omitempty"`
}

// fwdRequest is a call a follower forwards to the leader, with the
// principal it was made as: the leader authorizes and admits it again.
type fwdRequest struct {
	Verb      string       `json:"verb"`
	Principal fwdPrincipal `json:"principal"`
	Namespace string       `json:"namespace,omitempty"`
	Key       string       `json:"key,omitempty"`
	Schema    string       `json:"schema,omitempty"`
	Document  []byte       `json:"document,omitempty"`
	ExpectSet bool         `json:"expect_set,omitempty"`
	ExpectRev uint64       `json:"expect_rev,omitempty"`
	TTLMs     int64        `json:"ttl_ms,omitempty"`
}

type fwdError struct {
	Code            Code   `json:"code"`
	Field           string `json:"field,omitempty"`
	Message         string `json:"message"`
	CurrentRevision uint64 `json:"current_revision,omitempty"`
	NotApplied      bool   `json:"not_applied,omitempty"`
}

// fwdResponse is the leader's answer: the entry (or the revision of a
// delete), the leader's applied index once the call was answered, or the
// error.
type fwdResponse struct {
	Entry *Entry    `json:"entry,omitempty"`
	Index uint64    `json:"index"`
	Err   *fwdError `json:"err,omitempty"`
}

func (r *fwdResponse) entry() Entry {
	if r.Entry == nil {
		return Entry{}
	}
	return *r.Entry
}

func (r *fwdResponse) err() error {
	if r.Err == nil {
		return nil
	}
	e := &Error{Code: r.Err.Code, Field: r.Err.Field, Message: r.Err.Message, CurrentRevision: r.Err.CurrentRevision}
	if r.Err.NotApplied {
		e.Err = errNotApplied
	}
	return e
}

func principalOf(p fwdPrincipal) Principal {
	return Principal{ID: p.ID, Admin: p.Admin, system: p.System}
}

func fwdPrincipalOf(p Principal) fwdPrincipal {
	return fwdPrincipal{ID: p.ID, Admin: p.Admin, System: p.system}
}

// forward sends req to the leader id. sent reports whether it may have
// reached the leader: a failure after that leaves the outcome unknown.
func (c *clusterNode) forward(ctx context.Context, id string, req *fwdRequest) (resp fwdResponse, sent bool, err error) {
	c.rpcMu.Lock()
	addr, ok := c.rpcs[id]
	c.rpcMu.Unlock()
	if !ok {
		return resp, false, newErr(Unavailable, "leader", "the leader %q has no known RPC address", id)
	}
	out, err := c.caller.Call(ctx, addr, encodeForward(req))
	if err != nil {
		var ne *consensus.NotSentError
		if errors.As(err, &ne) || errors.Is(err, consensus.ErrNoPeer) {
			return resp, false, wrapErr(Unavailable, "leader", err)
		}
		if req.Verb == verbReadIndex {
			return resp, false, wrapErr(Unavailable, "leader", err)
		}
		return resp, true, &Error{Code: Unavailable, Field: "commit", Message: fmt.Sprintf("the call forwarded to the leader %q failed after it was sent: the outcome is unknown (%v)", id, err), Err: err}
	}
	if resp, err = decodeAnswer(out); err != nil {
		return resp, true, &Error{Code: Unavailable, Field: "commit", Message: fmt.Sprintf("the leader %q answered what does not decode: the outcome is unknown (%v)", id, err), Err: err}
	}
	return resp, true, nil
}

// handle serves a forwarded call at the leader.
func (c *clusterNode) handle(ctx context.Context, body []byte) ([]byte, error) {
	var req fwdRequest
	binaryForm := isBinaryForward(body)
	if binaryForm {
		var err error
		if req, err = decodeForward(body); err != nil {
			return nil, err
		}
	} else if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("forwarded request does not decode: %w", err)
	}
	if req.Verb == verbAgree {
		return c.answerAgreement()
	}
	if req.Verb == verbProgress || req.Verb == verbStats {
		// Before raft starts here there is nothing to tell.
		select {
		case <-c.started:
		default:
			return json.Marshal(progressAnswer{Err: &fwdError{Code: Unavailable, Field: "leader", Message: c.self + " is still starting", NotApplied: true}})
		}
		if req.Verb == verbStats {
			return json.Marshal(c.answerStats())
		}
		return json.Marshal(c.answerProgress())
	}
	ctx = context.WithValue(ctx, forwardedKey{}, true)
	s := c.s
	p := principalOf(req.Principal)
	var (
		resp fwdResponse
		e    Entry
		err  error
	)
	select {
	case <-c.started:
	default:
		// The RPC port opens before raft starts (peers ask it for
		// agreement then), and a peer that still takes this node for
		// the leader may forward to it meanwhile: nothing here can
		// serve that call yet, and nothing was applied.
		req.Verb = verbStarting
	}
	switch req.Verb {
	case verbStarting:
		err = notApplied("%s is still starting", c.self)
	case verbPut:
		x := Expect{set: req.ExpectSet, rev: req.ExpectRev}
		e, err = s.put(ctx, p, PutRequest{Namespace: req.Namespace, Key: req.Key, Schema: req.Schema, Document: req.Document,
			Expect: x, TTL: time.Duration(req.TTLMs) * time.Millisecond}, true)
	case verbDelete:
		var rev uint64
		rev, err = s.Delete(ctx, p, DeleteRequest{Namespace: req.Namespace, Key: req.Key, Expect: Expect{set: req.ExpectSet, rev: req.ExpectRev}})
		e = Entry{Namespace: req.Namespace, Key: req.Key, Revision: rev}
	case verbExpire:
		if !c.leaderReady() {
			err = notApplied("%s is not the leader", c.self)
		} else {
			_, err = s.home.pipe.submit(&op{kind: opExpire})
		}
	case verbReadIndex:
		if !c.leaderReady() {
			err = notApplied("%s is not the leader", c.self)
		} else {
			resp.Index, err = c.localReadIndex()
		}
	default:
		err = newErr(InvalidArgument, "verb", "unknown forwarded verb %q", req.Verb)
	}
	if err != nil {
		var se *Error
		if !errors.As(err, &se) {
			se = wrapErr(Unavailable, "leader", err)
		}
		resp.Err = &fwdError{Code: se.Code, Field: se.Field, Message: se.Message, CurrentRevision: se.CurrentRevision, NotApplied: retryable(err)}
	} else {
		resp.Entry = &e
	}
	if req.Verb != verbReadIndex {
		resp.Index = c.fsm.appliedIndex()
	}
	if binaryForm {
		return encodeAnswer(&resp), nil
	}
	return json.Marshal(&resp)
}
