package fuzz

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// FuzzStoreModel decodes its input into a sequence of API operations (put
// with every expected_revision form and TTL, delete, get, watch, ack,
// unwatch, advancing the fake clock, checkpoint, backup, restore, close and
// reopen) and applies each to a real store and to the model of the
// specification in apimodel_test.go.
//
// Property: after every operation the two agree: the same result (entry
// fields, revisions, or the same error code, with the same current
// revision for a CONFLICT), and every watch delivers exactly the messages
// the model expects, in order (snapshots, updates with their sequences,
// revisions, kinds and entries, closes with their reasons), and nothing
// more by the time its session ends.
//
// The ack deadline is set beyond any time the clock can reach, so
// ACK_TIMEOUT (a timer racing the operations) is left to the watch tests;
// every other close reason is covered.
func FuzzStoreModel(f *testing.F) {
	addSeeds(f, apiSeeds())
	f.Fuzz(func(t *testing.T, program []byte) {
		t.Parallel()
		withDeadline(t, 2*time.Minute, "the program", func() error {
			h := newHarness(t)
			defer h.finish()
			in := &program
			for n := 0; n < maxProgramOps && len(*in) > 0; n++ {
				if err := h.step(in); err != nil {
					return fmt.Errorf("operation %d: %w", n, err)
				}
			}
			return h.closeStore("end of program")
		})
	})
}

// maxProgramOps bounds one input's operations, so each run stays short.
const maxProgramOps = 120

// The fuzzed store's vocabulary: few enough names that operations collide.
var (
	fzAdmin      = statestore.Principal{ID: "ops", Admin: true}
	fzAlice      = statestore.Principal{ID: "alice"}
	fzPrincipals = []statestore.Principal{fzAdmin, fzAlice}
	fzNamespaces = []string{"group/a", "user/alice"}
	fzKeys       = []string{"k0", "k1", "k2", "p/k3"}
	fzPrefixes   = []string{"", "p/", "k1"}
	fzTTLs       = []time.Duration{0, 0, 0, time.Second, 3 * time.Second, 500 * time.Millisecond, 25 * time.Hour}
	fzAdvances   = []time.Duration{100 * time.Millisecond, 999 * time.Millisecond, time.Second, 1001 * time.Millisecond, 3 * time.Second, 25 * time.Hour}
)

const fzSlots = 3

// Operation codes: the first byte of each operation, modulo opCount.
const (
	opPut = iota
	opDelete
	opGet
	opWatch
	opAck
	opUnwatch
	opAdvance
	opCheckpoint
	opBackup
	opRestore
	opReopen
	opCount
)

// fzLimits are small where a bound is worth reaching.
var fzLimits = quota.Limits{MaxEntriesPerNamespace: 3, MaxUnackedUpdates: 4, AckDeadline: 100_000 * time.Hour}

// harness runs one program on a store and on the model.
type harness struct {
	t        *testing.T
	dir      string
	clk      *clock.Fake
	opts     statestore.Options
	s        *statestore.Store
	m        *model
	sessions [fzSlots]*fzSession
	backup   []byte
	gen      int // distinguishes watch ids across sessions
}

// fzSession is one slot's session and its sink.
type fzSession struct {
	ss   *statestore.Session
	sink chan watch.Message
	p    statestore.Principal
	id   string // the watch_id this session uses
}

// sinkOf is an unbounded-enough Sink: it never refuses, so only the
// registry's own bounds close a watch.
type sinkOf chan watch.Message

func (c sinkOf) Deliver(m watch.Message) error { c <- m; return nil }

func newHarness(t *testing.T) *harness {
	clk := clock.NewFake(t0)
	h := &harness{t: t, dir: scratchDir(t), clk: clk}
	h.opts = statestore.Options{Dir: h.dir, Clock: clk, Schemas: schema.NewRegistry(), Limits: fzLimits, NoSync: true, CheckpointBytes: -1}
	h.m = newModel(t0.UnixMilli(), h.opts)
	h.open()
	return h
}

func (h *harness) open() {
	s, err := statestore.Open(h.opts)
	if err != nil {
		h.t.Fatalf("open: %v", err)
	}
	h.s = s
	h.m.expireDue() // Open purges overdue leases; no watch exists yet
}

// finish closes whatever is still open after a failure.
func (h *harness) finish() {
	if h.s != nil {
		h.s.Close()
	}
}

// arg consumes one byte of the program (0 once it is used up) and returns
// it modulo n.
func arg(in *[]byte, n int) int {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return int(b) % n
}

// expectFor builds an expected_revision from a selector: absent, create
// only, the entry's current revision, a stale one, or the namespace's.
func (h *harness) expectFor(sel int, ns, key string) statestore.Expect {
	cur := h.m.Entries[mKey{ns, key}].Rev
	switch sel {
	case 1:
		return statestore.CreateOnly
	case 2:
		if cur == 0 {
			return statestore.IfRevision(7)
		}
		return statestore.IfRevision(cur)
	case 3:
		return statestore.IfRevision(max(cur, 2) - 1)
	case 4:
		return statestore.IfRevision(max(h.m.Revs[ns], 1))
	}
	return statestore.Expect{}
}

// document returns a document for selector n: seven valid ones, and one
// the media-intent schema refuses.
func document(n int) ([]byte, bool) {
	if n == 7 {
		return []byte(`{"role":"sideways","desired":true,"source_id":"cam","media_kind":"video"}`), false
	}
	return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":"cam-%d","media_kind":"video","priority":%d}`, n, n), true
}

// step runs one operation on both and compares.
func (h *harness) step(in *[]byte) error {
	ctx := context.Background()
	code := arg(in, 256) % opCount
	var what string
	switch code {
	case opPut:
		p, ns, key := fzPrincipals[arg(in, 2)], fzNamespaces[arg(in, 2)], fzKeys[arg(in, 4)]
		x := h.expectFor(arg(in, 5), ns, key)
		ttl := fzTTLs[arg(in, len(fzTTLs))]
		doc, valid := document(arg(in, 8))
		what = fmt.Sprintf("put %s %s/%s %+v ttl %v %s", p.ID, ns, key, x, ttl, doc)
		e, err := h.s.Put(ctx, p, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: doc, Expect: x, TTL: ttl})
		me, merr := h.m.put(p, ns, key, string(doc), valid, x, ttl)
		if err := h.compareEntry(what, e, err, me, merr); err != nil {
			return err
		}
	case opDelete:
		p, ns, key := fzPrincipals[arg(in, 2)], fzNamespaces[arg(in, 2)], fzKeys[arg(in, 4)]
		x := h.expectFor(arg(in, 5), ns, key)
		what = fmt.Sprintf("delete %s %s/%s %+v", p.ID, ns, key, x)
		rev, err := h.s.Delete(ctx, p, statestore.DeleteRequest{Namespace: ns, Key: key, Expect: x})
		mrev, merr := h.m.del(p, ns, key, x)
		if err := h.compareErr(what, err, merr); err != nil {
			return err
		}
		if err == nil && rev != mrev {
			return fmt.Errorf("%s: revision %d, model %d", what, rev, mrev)
		}
	case opGet:
		p, ns, key := fzPrincipals[arg(in, 2)], fzNamespaces[arg(in, 2)], fzKeys[arg(in, 4)]
		what = fmt.Sprintf("get %s %s/%s", p.ID, ns, key)
		e, err := h.s.Get(ctx, p, ns, key)
		me, merr := h.m.get(p, ns, key)
		if err := h.compareEntry(what, e, err, me, merr); err != nil {
			return err
		}
	case opWatch:
		slot, p, ns, prefix := arg(in, fzSlots), fzPrincipals[arg(in, 2)], fzNamespaces[arg(in, 2)], fzPrefixes[arg(in, 3)]
		fs := h.session(slot, p)
		what = fmt.Sprintf("watch slot %d (%s) %s prefix %q", slot, fs.p.ID, ns, prefix)
		res, err := h.s.Watch(ctx, fs.ss, statestore.WatchRequest{WatchID: fs.id, Namespace: ns, KeyPrefix: prefix})
		rev, snap, merr := h.m.watch(slot, fs.p, fs.id, ns, prefix)
		if err := h.compareErr(what, err, merr); err != nil {
			return err
		}
		if err == nil {
			got := make([]string, len(res.Entries))
			for i, e := range res.Entries {
				got[i] = renderEntry(e.Key, entryOf(&e))
			}
			if res.SnapshotRevision != rev || fmt.Sprint(got) != fmt.Sprint(snap) {
				return fmt.Errorf("%s: snapshot@%d %v, model @%d %v", what, res.SnapshotRevision, got, rev, snap)
			}
		}
	case opAck:
		slot, sel := arg(in, fzSlots), arg(in, 4)
		fs := h.sessions[slot]
		if fs == nil {
			return nil
		}
		var applied uint64
		if w := h.m.watches[slot]; w != nil {
			applied = []uint64{w.Seq, max(w.Seq, 1) - 1, w.Seq + 1, 0}[sel]
		}
		what = fmt.Sprintf("ack slot %d %d", slot, applied)
		if err := h.compareErr(what, h.s.Ack(fs.ss, fs.id, applied), h.m.ack(slot, applied)); err != nil {
			return err
		}
	case opUnwatch:
		slot := arg(in, fzSlots)
		fs := h.sessions[slot]
		if fs == nil {
			return nil
		}
		what = fmt.Sprintf("unwatch slot %d", slot)
		if err := h.compareErr(what, h.s.Unwatch(fs.ss, fs.id), h.m.unwatch(slot)); err != nil {
			return err
		}
	case opAdvance:
		d := fzAdvances[arg(in, len(fzAdvances))]
		what = fmt.Sprintf("advance %v", d)
		h.clk.Advance(d)
		h.m.now += d.Milliseconds()
		// The store expires due leases in the background; a read of one
		// of them commits every due EXPIRE now, so the next operation
		// meets the state the model has.
		if k, ok := h.m.due(); ok {
			if _, err := h.s.Get(ctx, fzAdmin, k.NS, k.Key); !errors.Is(err, statestore.ErrNotFound) {
				return fmt.Errorf("%s: due lease %s/%s read as %v", what, k.NS, k.Key, err)
			}
		}
		h.m.expireDue()
	case opCheckpoint:
		what = "checkpoint"
		if err := h.s.Checkpoint(); err != nil {
			return fmt.Errorf("checkpoint: %v", err)
		}
	case opBackup:
		what = "backup"
		var buf bytes.Buffer
		if err := h.s.Backup(&buf); err != nil {
			return fmt.Errorf("backup: %v", err)
		}
		h.backup = buf.Bytes()
		b := h.m.mState.clone()
		h.m.backup = &b
	case opRestore:
		if h.backup == nil {
			return nil
		}
		what = "restore"
		if err := h.s.Restore(bytes.NewReader(h.backup)); err != nil {
			return fmt.Errorf("restore: %v", err)
		}
		h.m.restore()
	case opReopen:
		what = "close and reopen"
		if err := h.closeStore("reopen"); err != nil {
			return err
		}
		h.open()
	}
	return h.deliveries(what)
}

// session returns slot's session, opening one for p if it has none; a
// session keeps its principal and watch_id for the store's life.
func (h *harness) session(slot int, p statestore.Principal) *fzSession {
	if fs := h.sessions[slot]; fs != nil {
		return fs
	}
	sink := make(sinkOf, 1024)
	ss, err := h.s.OpenSession(p, sink)
	if err != nil {
		h.t.Fatalf("open session: %v", err)
	}
	h.gen++
	fs := &fzSession{ss: ss, sink: sink, p: p, id: fmt.Sprintf("w%d", h.gen)}
	h.sessions[slot] = fs
	return fs
}

// deliveries receives, from every session, the messages the model expects
// so far and compares them.
func (h *harness) deliveries(when string) error {
	for slot, fs := range h.sessions {
		if fs == nil {
			continue
		}
		want := h.m.expect[slot]
		for i := 0; i < len(want); i++ {
			var got watch.Message
			select {
			case got = <-fs.sink:
			case <-time.After(20 * time.Second):
				return fmt.Errorf("%s: slot %d never delivered %v", when, slot, want[i])
			}
			g := render(got)
			if g == want[i].String() {
				continue
			}
			// A closed watch's updates still queued are dropped (watch
			// package contract), so a Closed may arrive in place of the
			// updates the model queued before it: they must all be updates,
			// and the Closed the very one the model expects after them.
			j := droppedBeforeClose(want, i, g)
			if j < 0 {
				return fmt.Errorf("%s: slot %d delivered %s, model expects %s", when, slot, g, want[i])
			}
			i = j
		}
		h.m.expect[slot] = nil
	}
	return nil
}

// droppedBeforeClose returns the index of the Closed message in want that
// got (a rendered message) stands for when every expected message from i
// up to it is an update the store may have dropped, or -1.
func droppedBeforeClose(want []mMsg, i int, got string) int {
	for j := i; j < len(want); j++ {
		switch want[j].Kind {
		case "update":
			continue
		case "closed":
			if want[j].String() == got {
				return j
			}
		}
		return -1
	}
	return -1
}

// closeStore closes the store, receives the STORE_CLOSED closes, and checks
// that no session delivered anything beyond what the model expects.
func (h *harness) closeStore(when string) error {
	if err := h.s.Close(); err != nil {
		return fmt.Errorf("%s: close: %v", when, err)
	}
	h.s = nil
	h.m.closeAll(watch.StoreClosed)
	if err := h.deliveries(when + " close"); err != nil {
		return err
	}
	for slot, fs := range h.sessions {
		if fs == nil {
			continue
		}
		<-fs.ss.Done()
		select {
		case m := <-fs.sink:
			return fmt.Errorf("%s: slot %d delivered %s, which the model does not expect", when, slot, render(m))
		default:
		}
		h.sessions[slot] = nil
	}
	return nil
}

// entryOf is the model's view of a store entry.
func entryOf(e *statestore.Entry) mEntry {
	return mEntry{Owner: e.Owner, Rev: e.Revision, Created: e.CreatedMs, Updated: e.UpdatedMs, Expires: e.ExpiresMs, Doc: string(e.Document)}
}

// render is a store message in the model's notation.
func render(m watch.Message) string {
	switch m := m.(type) {
	case *watch.Snapshot:
		out := make([]string, len(m.Entries))
		for i, e := range m.Entries {
			out[i] = renderEntry(e.Key, entryOf(e))
		}
		return mMsg{Kind: "snapshot", Rev: m.SnapshotRevision, Entries: out}.String()
	case *watch.Update:
		u := mMsg{Kind: "update", Seq: m.Sequence, Rev: m.Revision, Update: m.Kind, Key: m.Key}
		if m.Entry != nil {
			e := entryOf(m.Entry)
			u.Entry = &e
		}
		return u.String()
	case *watch.Closed:
		return mMsg{Kind: "closed", Reason: m.Reason}.String()
	}
	return fmt.Sprintf("%T", m)
}

// compareErr checks that the store failed exactly when the model did, with
// the same code (and current revision, for CONFLICT).
func (h *harness) compareErr(what string, err error, merr *mErr) error {
	switch {
	case err == nil && merr == nil:
		return nil
	case err == nil:
		return fmt.Errorf("%s: succeeded, model expects %v", what, merr.Code)
	case merr == nil:
		return fmt.Errorf("%s: %v, model expects success", what, err)
	}
	var se *statestore.Error
	if !errors.As(err, &se) || se.Code != merr.Code {
		return fmt.Errorf("%s: %v, model expects %v", what, err, merr.Code)
	}
	if se.Code == statestore.Conflict && se.CurrentRevision != merr.Current {
		return fmt.Errorf("%s: CONFLICT at current revision %d, model %d", what, se.CurrentRevision, merr.Current)
	}
	return nil
}

// compareEntry compares a put's or get's result.
func (h *harness) compareEntry(what string, e statestore.Entry, err error, me mEntry, merr *mErr) error {
	if err := h.compareErr(what, err, merr); err != nil || merr != nil {
		return err
	}
	if got, want := renderEntry(e.Key, entryOf(&e)), renderEntry(e.Key, me); got != want {
		return fmt.Errorf("%s: %s, model %s", what, got, want)
	}
	return nil
}

// apiSeeds are programs that reach each part of the model: compare-and-set
// races and conflicts, leases that lapse under watches, the unacknowledged
// bound, a backup restored under watches, and a restart with an overdue
// lease. Each operation is its code followed by its argument bytes.
func apiSeeds() map[string][]any {
	prog := func(ops ...[]byte) []any { return []any{bytes.Join(ops, nil)} }
	op := func(code byte, args ...byte) []byte { return append([]byte{code}, args...) }
	put := func(p, ns, key, expect, ttl, doc byte) []byte { return op(opPut, p, ns, key, expect, ttl, doc) }
	return map[string][]any{
		"cas": prog(
			put(0, 0, 0, 1, 0, 1), put(0, 0, 0, 1, 0, 2), put(0, 0, 0, 2, 0, 3), put(0, 0, 0, 3, 0, 4),
			op(opDelete, 0, 0, 0, 3), op(opDelete, 0, 0, 0, 2), op(opGet, 0, 0, 0), op(opDelete, 0, 0, 0, 0),
			put(1, 0, 1, 0, 0, 1), put(1, 1, 1, 0, 0, 1), op(opGet, 1, 0, 1), put(0, 1, 2, 0, 0, 7),
			put(0, 0, 1, 0, 0, 1), put(0, 0, 2, 0, 0, 1), put(0, 0, 3, 0, 0, 1), put(0, 0, 0, 0, 0, 1)),
		"leases-under-watch": prog(
			op(opWatch, 0, 0, 0, 0), op(opWatch, 1, 1, 1, 1),
			put(0, 0, 0, 0, 3, 1), put(1, 1, 3, 0, 4, 2), put(0, 0, 1, 0, 5, 3), put(0, 0, 2, 0, 6, 4),
			op(opAdvance, 2), op(opAck, 0, 0), op(opAdvance, 4), op(opGet, 0, 1, 3), op(opAdvance, 5),
			op(opWatch, 0, 0, 0, 0), op(opUnwatch, 1), op(opAck, 1, 0)),
		"overflow": prog(
			op(opWatch, 2, 0, 0, 0), put(0, 0, 0, 0, 0, 1), put(0, 0, 0, 0, 0, 2), op(opAck, 2, 1),
			put(0, 0, 0, 0, 0, 3), put(0, 0, 0, 0, 0, 4), put(0, 0, 0, 0, 0, 5), put(0, 0, 0, 0, 0, 6),
			put(0, 0, 0, 0, 0, 0), op(opAck, 2, 0), op(opAck, 2, 2), op(opWatch, 2, 0, 0, 1)),
		"backup-restore-restart": prog(
			put(0, 0, 0, 0, 0, 1), put(0, 0, 1, 0, 4, 2), op(opBackup), put(0, 0, 0, 0, 0, 3),
			op(opDelete, 0, 0, 1, 0), op(opWatch, 0, 0, 0, 0), op(opCheckpoint), op(opAdvance, 4),
			op(opRestore), op(opGet, 0, 0, 0), op(opWatch, 0, 0, 0, 0), put(0, 0, 2, 0, 3, 5),
			op(opAdvance, 3), op(opReopen), op(opGet, 0, 0, 2), op(opWatch, 1, 0, 0, 0), op(opAdvance, 1),
			op(opReopen), op(opGet, 0, 0, 2), op(opRestore)),
	}
}
