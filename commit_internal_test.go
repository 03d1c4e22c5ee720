package statestore

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
)

// The pipeline on a fake log: no journal, no disk, no Store. Each test
// names the property it pins; the property's one-line break it was
// checked against is in its comment.

// fakeLog is a commitLog whose writes and syncs a test controls: a sync
// may be held until the test releases it, and may fail. A failed sync
// leaves durable what partial says (the first batches of its round, say)
// and lets the next write start after it; it keeps no record from being
// synced later, as a replicated log might not, so the pipeline's own
// guards are what the tests see.
type fakeLog struct {
	mu      sync.Mutex
	written uint64   // last index written
	durable uint64   // last index synced
	partial uint64   // what a failing sync leaves durable, if more than before
	writes  [][2]int // (first index, records) per Write
	// hold, when set, is received from by every Sync before it returns;
	// entered is sent on when a Sync starts waiting on hold.
	hold     chan error
	entered  chan uint64
	released sync.Once
	events   []string // writes, syncs and publications, in order
}

// release lets every held sync, and every later one, succeed.
func (l *fakeLog) release() {
	l.mu.Lock()
	hold := l.hold
	l.mu.Unlock()
	if hold != nil {
		l.released.Do(func() { close(hold) })
	}
}

func (l *fakeLog) Write(recs []*journal.Record, first uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if first != l.written+1 {
		return fmt.Errorf("write at %d after %d: %w", first, l.written, journal.ErrStale)
	}
	l.written = first + uint64(len(recs)) - 1
	l.writes = append(l.writes, [2]int{int(first), len(recs)})
	l.events = append(l.events, fmt.Sprintf("write %d-%d", first, l.written))
	return nil
}

func (l *fakeLog) Sync(upTo uint64, park bool) error {
	l.mu.Lock()
	hold, entered := l.hold, l.entered
	l.mu.Unlock()
	var err error
	if hold != nil {
		if entered != nil {
			entered <- upTo
		}
		err = <-hold
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.events = append(l.events, fmt.Sprintf("sync %d failed", upTo))
		l.durable = max(l.durable, l.partial)
		l.written = l.durable
		return err
	}
	l.durable = max(l.durable, upTo)
	l.events = append(l.events, fmt.Sprintf("synced %d", upTo))
	return nil
}

func (l *fakeLog) Durable() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

func (l *fakeLog) Poll() {}

func (l *fakeLog) record(event string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, event)
}

func (l *fakeLog) history() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// fakeHome is the published side of a pipeline on a fake log: the view
// and index each publication leaves.
type fakeHome struct {
	mu    sync.Mutex
	view  *materialize.View
	index uint64
	log   *fakeLog
}

func (h *fakeHome) publish(b *batch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.view, h.index = b.view, b.last
	h.log.record(fmt.Sprintf("publish %d", b.last))
}

func (h *fakeHome) published() (*materialize.View, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.view, h.index
}

// newFakePipeline is a started pipeline on log, admitting with the default
// limits on a fake clock.
func newFakePipeline(t *testing.T, log *fakeLog) (*pipeline, *fakeHome) {
	t.Helper()
	limits, _ := quota.Limits{}.WithDefaults()
	adm := &admission{limits: limits, clock: clock.NewFake(time.UnixMilli(1_750_000_000_000)), others: func() quota.Usage { return quota.Usage{} }}
	home := &fakeHome{view: materialize.New(), log: log}
	p := newPipeline(commitEnv{
		log: log, admit: adm.admitAll, publish: home.publish, published: home.published,
		afterRound: func(bool, bool) {},
		closed:     func() error { return newErr(Unavailable, "store", "closed") },
		metrics:    newMetrics(),
	})
	p.start()
	t.Cleanup(func() {
		log.release() // a sync still held would keep close from draining
		p.close()
	})
	return p, home
}

func putOp(key string, x Expect) *op {
	doc := fmt.Appendf(nil, `{"k":%q}`, key)
	return &op{kind: opPut, owner: "alice", ns: "user/alice", key: key, schema: "keeppeek.media-intent.v1", doc: doc, reply: doc, expect: x}
}

type answer struct {
	e   Entry
	err error
}

// submitAsync submits o in its own goroutine and returns where its answer
// will arrive.
func submitAsync(p *pipeline, o *op) <-chan answer {
	c := make(chan answer, 1)
	go func() {
		e, err := p.submit(o)
		c <- answer{e, err}
	}()
	return c
}

// submitMany submits n puts with expect x of keys prefix00, prefix01, ...,
// each in its own goroutine, and returns where their answers will arrive.
func submitMany(p *pipeline, prefix string, n int, x Expect) []<-chan answer {
	var c []<-chan answer
	for i := range n {
		c = append(c, submitAsync(p, putOp(fmt.Sprintf("%s%02d", prefix, i), x)))
	}
	return c
}

// waitFor waits until count reports at least n of what it counts.
func waitFor(t *testing.T, what string, n int, count func() int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c := count(); c < n; c = count() {
		if time.Now().After(deadline) {
			t.Fatalf("%d %s after 10 s, want %d", c, what, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitQueued waits until n ops are queued for the write stage.
func waitQueued(t *testing.T, p *pipeline, n int) {
	t.Helper()
	waitFor(t, "ops queued", n, func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.queue)
	})
}

// waitWritten waits until the log has seen n writes.
func waitWritten(t *testing.T, log *fakeLog, n int) {
	t.Helper()
	waitFor(t, "writes", n, func() int {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.writes)
	})
}

// TestPipelineCommitsBeforeApply: no publication and no answer before the
// sync covering the batch returned, and publication before the answer.
// (Checked against: publishing in syncRound before the log's Sync.)
func TestPipelineCommitsBeforeApply(t *testing.T) {
	t.Parallel()
	log := &fakeLog{hold: make(chan error), entered: make(chan uint64, 1)}
	p, home := newFakePipeline(t, log)
	got := submitAsync(p, putOp("a", CreateOnly))
	if upTo := <-log.entered; upTo != 1 {
		t.Fatalf("sync up to %d, want 1", upTo)
	}
	select {
	case a := <-got:
		t.Fatalf("answered before its sync returned: %+v", a)
	default:
	}
	if _, idx := home.published(); idx != 0 {
		t.Fatalf("published index %d before the sync returned", idx)
	}
	log.hold <- nil
	a := <-got
	if a.err != nil || a.e.Revision != 1 {
		t.Fatalf("answer %+v", a)
	}
	if h := log.history(); !slices.Equal(h, []string{"write 1-1", "synced 1", "publish 1"}) {
		t.Fatalf("history %q, want write, sync, publish", h)
	}
}

// TestPipelinePoisonsAfterFailedSync: a batch admitted on top of one whose
// sync fails is answered STORAGE too and never published, whatever its own
// fate; once the pipeline drains, the next batch is admitted against the
// published state again. (Checked against: dropping the "case poisoned"
// branch of syncRound, and not rebuilding pending after the failure.)
func TestPipelinePoisonsAfterFailedSync(t *testing.T) {
	t.Parallel()
	log := &fakeLog{hold: make(chan error), entered: make(chan uint64, 4)}
	p, home := newFakePipeline(t, log)
	first := submitAsync(p, putOp("a", CreateOnly))
	<-log.entered // batch 1 (a) is in its sync
	// While it syncs, enough ops queue for the write stage to admit them
	// on top of it: b is created in a batch built on a's.
	rest := submitMany(p, "b", minWriteBatch, CreateOnly)
	waitWritten(t, log, 2)
	log.hold <- syscall.EIO // batch 1's sync fails
	if a := <-first; CodeOf(a.err) != Storage {
		t.Fatalf("the failed batch answered %v", a.err)
	}
	<-log.entered
	log.hold <- nil // batch 2's own sync succeeds: the log kept it
	for i, c := range rest {
		if a := <-c; CodeOf(a.err) != Storage {
			t.Fatalf("op %d of the batch on top answered %v, want STORAGE", i, a.err)
		}
	}
	if _, idx := home.published(); idx != 0 {
		t.Fatalf("published index %d after the failure", idx)
	}
	// Drained: the next op is admitted on the published (empty) state, so
	// a create-only of a succeeds, at revision 1, written at index 1.
	next := submitAsync(p, putOp("a", CreateOnly))
	select {
	case <-log.entered:
		log.hold <- nil
	case a := <-next:
		t.Fatalf("after the failure, answered without a sync: %+v", a)
	}
	if a := <-next; a.err != nil || a.e.Revision != 1 {
		t.Fatalf("after the failure: %+v", a)
	}
	if w := log.writes[len(log.writes)-1]; w != [2]int{1, 1} {
		t.Fatalf("last write (first, records) %v, want (1, 1)", w)
	}
}

// TestPipelinePublishesWhatWasSynced: when one sync covers two batches
// and fails after the first became durable, the first is published and
// answered, the second fails. (Checked against: failing every batch of a
// failed round.)
func TestPipelinePublishesWhatWasSynced(t *testing.T) {
	t.Parallel()
	log := &fakeLog{hold: make(chan error), entered: make(chan uint64, 4)}
	p, home := newFakePipeline(t, log)
	first := submitAsync(p, putOp("a", CreateOnly))
	<-log.entered // batch 1 (index 1) syncing: the next two are written meanwhile
	second := submitMany(p, "b", minWriteBatch, CreateOnly)
	waitWritten(t, log, 2)
	third := submitMany(p, "c", minWriteBatch, CreateOnly)
	waitWritten(t, log, 3)
	log.hold <- nil
	if a := <-first; a.err != nil {
		t.Fatal(a.err)
	}
	// One round syncs batches 2 (indexes 2..33) and 3 (34..65); the sync
	// fails with batch 2 durable.
	if upTo := <-log.entered; upTo != 1+2*minWriteBatch {
		t.Fatalf("the round syncs up to %d, want %d", upTo, 1+2*minWriteBatch)
	}
	log.mu.Lock()
	log.partial = 1 + minWriteBatch
	log.mu.Unlock()
	log.hold <- syscall.EIO
	for _, c := range second {
		if a := <-c; a.err != nil {
			t.Fatalf("a durable batch answered %v", a.err)
		}
	}
	for _, c := range third {
		if a := <-c; CodeOf(a.err) != Storage {
			t.Fatalf("the batch past the durable floor answered %v, want STORAGE", a.err)
		}
	}
	if v, idx := home.published(); idx != 1+minWriteBatch || v.Namespace("user/alice").Entries != 1+minWriteBatch {
		t.Fatalf("published index %d with %d entries, want batches 1 and 2 at %d", idx, v.Namespace("user/alice").Entries, 1+minWriteBatch)
	}
}

// TestPipelineBatchLimits: while a sync is in flight the write stage waits
// for minWriteBatch ops before admitting the next batch, and no batch
// holds more than maxBatch ops. (Checked against: admitting whatever is
// queued while a sync runs, and an unbounded batch.)
func TestPipelineBatchLimits(t *testing.T) {
	t.Parallel()
	log := &fakeLog{hold: make(chan error), entered: make(chan uint64, 8)}
	p, _ := newFakePipeline(t, log)
	first := submitAsync(p, putOp("first", CreateOnly))
	<-log.entered
	waiting := submitMany(p, "w", minWriteBatch-1, CreateOnly)
	waitQueued(t, p, minWriteBatch-1)
	log.mu.Lock()
	writes := len(log.writes)
	log.mu.Unlock()
	if writes != 1 {
		t.Fatalf("%d writes with %d ops queued behind a sync, want the write stage to wait", writes, minWriteBatch-1)
	}
	waiting = append(waiting, submitAsync(p, putOp("last", CreateOnly)))
	waitWritten(t, log, 2)
	if w := log.writes[1]; w[1] != minWriteBatch {
		t.Fatalf("second batch of %d records, want %d", w[1], minWriteBatch)
	}
	log.release()
	for _, c := range append(waiting, first) {
		if a := <-c; a.err != nil {
			t.Fatal(a.err)
		}
	}

	// An exclusive section holds the write stage off while 600 ops queue:
	// released, they go as a batch of maxBatch and one of the rest.
	log2 := &fakeLog{}
	p2, _ := newFakePipeline(t, log2)
	const n = maxBatch + 88
	var answers []<-chan answer
	err := p2.exclusive(func() error {
		answers = submitMany(p2, "k", n, Expect{})
		waitQueued(t, p2, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range answers {
		if a := <-c; a.err != nil {
			t.Fatal(a.err)
		}
	}
	if !slices.Equal(log2.writes, [][2]int{{1, maxBatch}, {maxBatch + 1, n - maxBatch}}) {
		t.Fatalf("writes %v, want one of %d and one of %d", log2.writes, maxBatch, n-maxBatch)
	}
}

// TestPipelineExclusiveAndClose: an exclusive section runs with nothing
// in flight and holds new batches until it ends; close answers every op
// queued, refuses new ones with the environment's closed answer, and
// turns away an exclusive section. (Checked against: quietLocked not
// waiting for in-flight batches.)
func TestPipelineExclusiveAndClose(t *testing.T) {
	t.Parallel()
	log := &fakeLog{hold: make(chan error), entered: make(chan uint64, 4)}
	p, home := newFakePipeline(t, log)
	inflight := submitAsync(p, putOp("a", CreateOnly))
	<-log.entered
	ran := make(chan uint64, 1)
	done := make(chan error, 1)
	go func() {
		done <- p.exclusive(func() error {
			_, idx := home.published()
			ran <- idx
			return nil
		})
	}()
	select {
	case idx := <-ran:
		t.Fatalf("exclusive ran with a batch in its sync (published %d)", idx)
	case <-time.After(20 * time.Millisecond):
	}
	log.hold <- nil
	if idx := <-ran; idx != 1 {
		t.Fatalf("exclusive saw index %d, want the synced batch published", idx)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a := <-inflight; a.err != nil {
		t.Fatal(a.err)
	}
	log.release()
	queued := submitAsync(p, putOp("b", CreateOnly))
	if !p.close() {
		t.Fatal("close reported the pipeline closed already")
	}
	if a := <-queued; a.err != nil && CodeOf(a.err) != Unavailable {
		t.Fatalf("op queued at close answered %v", a.err)
	}
	if _, err := p.submit(putOp("c", CreateOnly)); CodeOf(err) != Unavailable {
		t.Fatalf("op after close answered %v, want UNAVAILABLE", err)
	}
	if err := p.exclusive(func() error { return errors.New("ran") }); CodeOf(err) != Unavailable {
		t.Fatalf("exclusive after close: %v", err)
	}
	if p.close() || !p.isClosed() {
		t.Fatal("a second close must report false, isClosed true")
	}
}
