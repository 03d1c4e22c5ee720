package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/stateclient"
	"github.com/keeppeek/statestore/worker/watchcache"
)

// Conn is the reconciler's connection to the state store: a principal's
// reads and writes, and the watch calls its caches make.
type Conn interface {
	stateclient.Client
	watchcache.Source
}

// Config configures a Reconciler.
type Config struct {
	// Namespace holds the intents, leases and status entries.
	Namespace string
	// IntentPrefix selects the intents to follow ("intents/" by default).
	IntentPrefix string
	// StatusPrefix is where observed status goes ("status/" by default);
	// each worker writes StatusPrefix + Holder + "/" + the intent's name.
	StatusPrefix string
	// LeasePrefix, when set, makes publish intents need a lease at
	// LeasePrefix + <source_id>-<media_kind>-<variant or profile>.
	LeasePrefix string
	// Holder is this worker instance's ID, required.
	Holder string
	// Lease is the lease timing template (TTL, RenewEvery, Jitter, Rand).
	Lease lease.Config
	// Codecs this worker can handle; empty means any.
	Codecs []string

	Schemas      *schema.Registry // must hold RegisterSchemas' schemas
	Capabilities Capabilities
	Media        Media
	Clock        clock.Clock // nil: the wall clock
	// Observe, when set, receives every Event, from the Run goroutine, after
	// the pass that produced it has armed its timers.
	Observe func(Event)
}

// ConfigError is a Config that cannot make a reconciler.
type ConfigError struct {
	Field  string
	Reason string
}

// Error names the field.
func (e *ConfigError) Error() string { return "reconcile config: " + e.Field + ": " + e.Reason }

// EventKind says what a reconciler did.
type EventKind string

// Event kinds.
const (
	EventClaimed      EventKind = "claimed"       // took the intent's lease
	EventStandby      EventKind = "standby"       // another worker holds it
	EventRenewed      EventKind = "renewed"       // renewed the lease
	EventLeaseLost    EventKind = "lease-lost"    // lease lapsed or taken; stopped acting
	EventReleased     EventKind = "released"      // released the lease
	EventBound        EventKind = "bound"         // Subscribe or StartPublication succeeded
	EventUnbound      EventKind = "unbound"       // Unsubscribe or StopPublication sent, or the binding ended with its session
	EventWaiting      EventKind = "waiting"       // capabilities do not allow acting yet
	EventRejected     EventKind = "rejected"      // the intent is invalid
	EventCommandError EventKind = "command-error" // the media server refused a command
	EventStatusFailed EventKind = "status-failed" // the status entry could not be written
	EventResynced     EventKind = "resynced"      // an intent snapshot was (re)installed
	EventStoreError   EventKind = "store-error"   // a watch or write failed
)

// Event is one thing a reconciler did, for tests and logs.
type Event struct {
	Kind   EventKind
	Intent string // intent key, "" for watch events
	Detail string
	Err    error
}

// String renders the event as "kind intent: detail".
func (e Event) String() string {
	s := string(e.Kind)
	if e.Intent != "" {
		s += " " + e.Intent
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

type inboxItem struct {
	msg          watch.Message
	disconnected bool
	reconnected  bool
}

// Reconciler is one worker's loop. Create it with New, connect it (it is
// the session's Link), then Run it.
type Reconciler struct {
	cfg Config

	mu    sync.Mutex
	inbox []inboxItem
	wake  chan struct{}

	// Run goroutine only:
	conn    Conn
	intents *watchcache.Cache
	leases  *watchcache.Cache
	tracked map[string]*tracked
	events  []Event
	// capsChanged is the Capabilities.Changed channel taken before the
	// current pass: closed once anything changed since.
	capsChanged <-chan struct{}
	ctx         context.Context
}

// tracked is what the reconciler knows of one intent key.
type tracked struct {
	key       string
	rev       uint64 // intent entry revision parsed
	in        intent.Intent
	parseErr  error
	lease     *lease.Lease
	standby   bool
	binding   *binding
	status    Status
	statusRev uint64 // 0: none written
	lastEvent string // deduplicates Waiting/Failed/Standby events
	// failedOn is set when a command failed for intent revision failedRev:
	// the Changed channel of that pass. The command is retried only once
	// it is closed (capabilities changed) or the intent changed, so a
	// refusal is not repeated on every unrelated wake-up.
	failedOn  <-chan struct{}
	failedRev uint64
}

// retryable reports whether a command that failed may be sent again.
func (t *tracked) retryable() bool {
	if t.failedOn == nil || t.failedRev != t.rev {
		return true
	}
	select {
	case <-t.failedOn:
		return true
	default:
		return false
	}
}

type binding struct {
	publish bool
	id      string
	session string
	variant string
}

// New checks cfg and returns a reconciler.
func New(cfg Config) (*Reconciler, error) {
	if cfg.IntentPrefix == "" {
		cfg.IntentPrefix = "intents/"
	}
	if cfg.StatusPrefix == "" {
		cfg.StatusPrefix = "status/"
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	overlaps := func(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }
	switch {
	case cfg.Namespace == "":
		return nil, &ConfigError{"namespace", "required"}
	case cfg.Holder == "":
		return nil, &ConfigError{"holder", "required"}
	case cfg.Schemas == nil || !cfg.Schemas.Has(StatusSchema) || (cfg.LeasePrefix != "" && !cfg.Schemas.Has(lease.Schema)):
		return nil, &ConfigError{"schemas", "must hold " + StatusSchema + " and " + lease.Schema + " (RegisterSchemas)"}
	case cfg.Capabilities == nil:
		return nil, &ConfigError{"capabilities", "required"}
	case cfg.Media == nil:
		return nil, &ConfigError{"media", "required"}
	case overlaps(cfg.StatusPrefix, cfg.IntentPrefix):
		return nil, &ConfigError{"status_prefix", fmt.Sprintf("%q overlaps the intent prefix %q: status must never land on an intent", cfg.StatusPrefix, cfg.IntentPrefix)}
	case cfg.LeasePrefix != "" && overlaps(cfg.LeasePrefix, cfg.IntentPrefix):
		return nil, &ConfigError{"lease_prefix", fmt.Sprintf("%q overlaps the intent prefix %q", cfg.LeasePrefix, cfg.IntentPrefix)}
	case cfg.LeasePrefix != "" && overlaps(cfg.LeasePrefix, cfg.StatusPrefix):
		return nil, &ConfigError{"lease_prefix", fmt.Sprintf("%q overlaps the status prefix %q", cfg.LeasePrefix, cfg.StatusPrefix)}
	}
	return &Reconciler{cfg: cfg, wake: make(chan struct{}, 1), tracked: map[string]*tracked{}}, nil
}

func (r *Reconciler) enqueue(it inboxItem) {
	r.mu.Lock()
	r.inbox = append(r.inbox, it)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Deliver queues a watch message (it is the session's watch.Sink). The
// queue is bounded by the server: each watch holds at most its
// unacknowledged-update bound, plus a snapshot and a closure.
func (r *Reconciler) Deliver(m watch.Message) error {
	r.enqueue(inboxItem{msg: m})
	return nil
}

// Disconnected tells the reconciler its control channel was lost.
func (r *Reconciler) Disconnected() { r.enqueue(inboxItem{disconnected: true}) }

// Reconnected tells the reconciler a new control channel is up: it takes
// fresh snapshots and reconciles.
func (r *Reconciler) Reconnected() { r.enqueue(inboxItem{reconnected: true}) }

// Run follows the intents until ctx ends. It returns when ctx is done,
// leaving bindings, leases and status as they are, as a crashed worker
// would: leases lapse by their TTL and the media server ends a departed
// worker's bindings with its session. It returns an error only if the
// first snapshot cannot be taken.
func (r *Reconciler) Run(ctx context.Context, conn Conn) error {
	r.conn, r.ctx = conn, ctx
	r.intents = watchcache.New(conn, r.cfg.Namespace, r.cfg.IntentPrefix, watchcache.WithWatchID(r.cfg.Holder+"-intents"))
	if err := r.intents.Start(); err != nil {
		return fmt.Errorf("reconcile: watch %s/%s: %w", r.cfg.Namespace, r.cfg.IntentPrefix, err)
	}
	if r.cfg.LeasePrefix != "" {
		r.leases = watchcache.New(conn, r.cfg.Namespace, r.cfg.LeasePrefix, watchcache.WithWatchID(r.cfg.Holder+"-leases"))
		if err := r.leases.Start(); err != nil {
			return fmt.Errorf("reconcile: watch %s/%s: %w", r.cfg.Namespace, r.cfg.LeasePrefix, err)
		}
	}
	r.emit(Event{Kind: EventResynced, Detail: fmt.Sprintf("snapshot at revision %d", r.intents.Revision())})
	var (
		timer  clock.Timer
		timerC <-chan time.Time
	)
	for {
		capsChanged := r.cfg.Capabilities.Changed()
		r.capsChanged = capsChanged
		r.pass()
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
		if at, ok := r.nextRenewal(); ok {
			timer = clock.TimerAt(r.cfg.Clock, at)
			timerC = timer.C()
		}
		r.flush()
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-r.wake:
			r.drain()
		case <-capsChanged:
		case <-timerC:
			timer, timerC = nil, nil
		}
	}
}

// Stop ends what this worker holds, for a graceful exit (a worker process
// told to stop by its supervisor): every binding is stopped
// (StopPublication, Unsubscribe), then every lease it holds is released
// with compare-and-set on its own revision, and each status it wrote says
// Stopped. The publication stops before its lease goes, so a standby that
// claims the released lease at once finds the output variant free instead
// of waiting for the TTL. Call it after Run returned, from the goroutine
// that called Run, with a context bounding the whole stop; its events
// reach Observe as Run's do. The reconciler is not to be run again.
func (r *Reconciler) Stop(ctx context.Context) {
	if r.conn == nil {
		return // never ran: it holds nothing
	}
	r.ctx = ctx
	keys := make([]string, 0, len(r.tracked))
	for key := range r.tracked {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		t := r.tracked[key]
		r.unbind(t, "worker stopping")
		r.release(t)
		if t.statusRev != 0 {
			r.writeStatus(t, Status{State: Stopped, Reason: "worker " + r.cfg.Holder + " stopped"})
		}
	}
	r.flush()
}

func (r *Reconciler) emit(e Event) { r.events = append(r.events, e) }

func (r *Reconciler) flush() {
	evs := r.events
	r.events = nil
	if r.cfg.Observe != nil {
		for _, e := range evs {
			r.cfg.Observe(e)
		}
	}
}

func (r *Reconciler) caches() []*watchcache.Cache {
	if r.leases != nil {
		return []*watchcache.Cache{r.intents, r.leases}
	}
	return []*watchcache.Cache{r.intents}
}

// drain hands queued messages to the caches (each ignores the other's
// watch ids) and applies connection changes.
func (r *Reconciler) drain() {
	r.mu.Lock()
	items := r.inbox
	r.inbox = nil
	r.mu.Unlock()
	for _, it := range items {
		for _, c := range r.caches() {
			before := c.Resnapshots()
			var err error
			switch {
			case it.disconnected:
				err = c.Disconnected()
			case it.reconnected:
				err = c.Start()
				if err == nil && c == r.intents {
					r.emit(Event{Kind: EventResynced, Detail: fmt.Sprintf("fresh snapshot at revision %d after reconnect", c.Revision())})
				}
			default:
				err = c.Handle(it.msg)
			}
			if err != nil && !errors.Is(err, watchcache.ErrAck) {
				r.emit(Event{Kind: EventStoreError, Err: err, Detail: err.Error()})
			}
			if c == r.intents && c.Resnapshots() != before {
				r.emit(Event{Kind: EventResynced, Detail: fmt.Sprintf("re-snapshot at revision %d", c.Revision())})
			}
		}
	}
}

func (r *Reconciler) nextRenewal() (time.Time, bool) {
	var next time.Time
	for _, t := range r.tracked {
		if t.lease != nil && t.lease.Held() && (next.IsZero() || t.lease.RenewAt().Before(next)) {
			next = t.lease.RenewAt()
		}
	}
	return next, !next.IsZero()
}

// pass reconciles every intent once.
func (r *Reconciler) pass() {
	r.renewDue()
	if !r.intents.Synced() {
		return // a stale copy must not start or stop anything
	}
	present := map[string]bool{}
	for _, key := range r.intents.Keys() {
		present[key] = true
		e, _ := r.intents.Get(key)
		t := r.tracked[key]
		if t == nil {
			t = &tracked{key: key}
			r.tracked[key] = t
		}
		if e.Revision != t.rev {
			t.rev = e.Revision
			t.in, t.parseErr = intent.Parse(r.cfg.Schemas, e.Document)
		}
		r.act(t)
	}
	for key, t := range r.tracked {
		if !present[key] {
			r.teardown(t)
			delete(r.tracked, key)
		}
	}
}

// renewDue renews every held lease whose renewal is due.
func (r *Reconciler) renewDue() {
	now := r.cfg.Clock.Now()
	for _, t := range r.tracked {
		if n, ok := lease.RenewIfDue(r.ctx, t.lease, now); ok {
			r.noteLease(t, n)
		}
	}
}

// leaseEvents are the events of the lease bookkeeping's notes.
var leaseEvents = [...]EventKind{lease.NoteRenewed: EventRenewed, lease.NoteReleased: EventReleased, lease.NoteStoreError: EventStoreError}

// noteLease reports what the lease bookkeeping did; a lost lease also
// ends what it guarded.
func (r *Reconciler) noteLease(t *tracked, n lease.Note) {
	if n.Kind == lease.NoteLost {
		r.loseLease(t, n.Err)
		return
	}
	r.emit(Event{Kind: leaseEvents[n.Kind], Intent: t.key, Err: n.Err, Detail: n.Detail})
}

func (r *Reconciler) loseLease(t *tracked, lost error) {
	r.emit(Event{Kind: EventLeaseLost, Intent: t.key, Err: lost, Detail: lost.Error()})
	r.unbind(t, "lease lost")
}

// act brings one intent's bindings in line with its document and the
// current capabilities.
func (r *Reconciler) act(t *tracked) {
	if t.parseErr != nil {
		r.unbind(t, "intent invalid")
		r.release(t)
		r.note(t, EventRejected, t.parseErr.Error(), t.parseErr)
		r.writeStatus(t, Status{State: Invalid, Reason: t.parseErr.Error()})
		return
	}
	if !t.in.Desired {
		r.unbind(t, "intent not desired")
		r.release(t)
		r.writeStatus(t, Status{State: Stopped, Reason: "desired is false"})
		return
	}
	if t.in.Role == intent.Publish && r.cfg.LeasePrefix != "" && !r.holdLease(t) {
		return
	}
	src, ok := r.cfg.Capabilities.Source(t.in.SourceID)
	if b := t.binding; b != nil && (!ok || b.session != src.SessionID) {
		// The source session ended; the server ended the binding with it.
		t.binding = nil
		r.emit(Event{Kind: EventUnbound, Intent: t.key, Detail: fmt.Sprintf("binding %s ended with source session %s", b.id, b.session)})
	}
	p := decide(t.in, src, ok, r.cfg.Codecs)
	if p.pub == nil && p.sub == nil {
		kind := EventWaiting
		if p.state == Invalid {
			kind = EventRejected
			r.unbind(t, "intent invalid")
		}
		r.note(t, kind, p.reason, nil)
		r.writeStatus(t, Status{State: p.state, Reason: p.reason})
		return
	}
	if b := t.binding; b != nil {
		if b.publish == (p.pub != nil) && (p.pub == nil || b.variant == p.pub.VariantID) && (p.sub == nil || p.sub.VariantID == "" || b.variant == p.sub.VariantID) {
			r.writeStatus(t, Status{State: Active, VariantID: b.variant, BindingID: b.id})
			return
		}
		r.unbind(t, "intent changed")
	}
	if !t.retryable() {
		return // the status already says Failed, and why
	}
	var (
		b   Binding
		err error
	)
	if p.pub != nil {
		b, err = r.cfg.Media.StartPublication(r.ctx, *p.pub)
	} else {
		b, err = r.cfg.Media.Subscribe(r.ctx, *p.sub)
	}
	if err != nil {
		t.failedOn, t.failedRev = r.capsChanged, t.rev
		r.note(t, EventCommandError, err.Error(), err)
		r.writeStatus(t, Status{State: Failed, Reason: err.Error()})
		return
	}
	t.binding = &binding{publish: p.pub != nil, id: b.ID, session: p.session, variant: b.VariantID}
	t.lastEvent, t.failedOn = "", nil
	r.emit(Event{Kind: EventBound, Intent: t.key, Detail: fmt.Sprintf("%s variant %s on session %s", b.ID, b.VariantID, p.session)})
	r.writeStatus(t, Status{State: Active, VariantID: b.VariantID, BindingID: b.ID})
}

// note emits a Waiting, Rejected, CommandError or Standby event once per
// distinct reason, so a pass that changes nothing says nothing.
func (r *Reconciler) note(t *tracked, kind EventKind, detail string, err error) {
	if s := string(kind) + detail; s != t.lastEvent {
		t.lastEvent = s
		r.emit(Event{Kind: kind, Intent: t.key, Detail: detail, Err: err})
	}
}

// LeaseKey is the lease key of a publish intent: one lease per source,
// media kind and output, as in the specification's
// leases/front-door-video-browser-h264-720p.
func LeaseKey(prefix string, in intent.Intent) string {
	out := in.VariantID
	if out == "" {
		out = in.OutputProfile
	}
	return prefix + in.SourceID + "-" + string(in.MediaKind) + "-" + out
}

// holdLease makes sure this worker holds the intent's lease, claiming it
// when the watch shows it free, and reports whether it does.
func (r *Reconciler) holdLease(t *tracked) bool {
	key := LeaseKey(r.cfg.LeasePrefix, t.in)
	if t.lease != nil && t.lease.Key() != key {
		r.release(t) // the intent now names another output
	}
	if t.lease == nil {
		cfg := r.cfg.Lease
		cfg.Namespace, cfg.Key, cfg.Holder, cfg.IntentKey = r.cfg.Namespace, key, r.cfg.Holder, t.key
		l, err := lease.New(r.conn, r.cfg.Schemas, cfg)
		if err != nil {
			r.note(t, EventRejected, err.Error(), err)
			return false
		}
		t.lease = l
	}
	e, _ := r.leases.Get(key)
	h := t.lease.Hold(r.ctx, e, r.leases.Revision(), r.cfg.Clock.Now(), func(lost error) { r.loseLease(t, lost) })
	switch {
	case h.Standby:
		r.standby(t, e)
		return false
	case h.Err != nil:
		r.emit(Event{Kind: EventStoreError, Intent: t.key, Err: h.Err, Detail: "claim: " + h.Err.Error()})
		return false
	case h.Claimed:
		t.standby = false
		r.emit(Event{Kind: EventClaimed, Intent: t.key, Detail: fmt.Sprintf("%s revision %d", key, t.lease.Revision())})
	}
	return true
}

func (r *Reconciler) standby(t *tracked, e *statestore.Entry) {
	if !t.standby {
		t.standby = true
		detail := t.lease.Key()
		if e != nil {
			detail += " held by " + e.Owner
		}
		r.emit(Event{Kind: EventStandby, Intent: t.key, Detail: detail})
	}
}

// unbind stops the intent's binding, if any.
func (r *Reconciler) unbind(t *tracked, why string) {
	b := t.binding
	if b == nil {
		return
	}
	t.binding = nil
	var err error
	if b.publish {
		err = r.cfg.Media.StopPublication(r.ctx, b.id)
	} else {
		err = r.cfg.Media.Unsubscribe(r.ctx, b.id)
	}
	detail := fmt.Sprintf("%s (%s)", b.id, why)
	var ce *CommandError
	if err != nil && !(errors.As(err, &ce) && (ce.Code == PublicationNotFound || ce.Code == SubscribeNotFound)) {
		r.emit(Event{Kind: EventCommandError, Intent: t.key, Err: err, Detail: err.Error()})
		return
	}
	r.emit(Event{Kind: EventUnbound, Intent: t.key, Detail: detail})
}

func (r *Reconciler) release(t *tracked) {
	l := t.lease
	t.lease, t.standby = nil, false
	if n, ok := lease.Drop(r.ctx, l); ok {
		r.noteLease(t, n)
	}
}

// teardown handles an intent that disappeared: nobody wants it any more.
func (r *Reconciler) teardown(t *tracked) {
	r.unbind(t, "intent gone")
	r.release(t)
	if err := lease.DeleteOwned(r.ctx, r.conn, r.cfg.Namespace, r.statusKey(t.key), t.statusRev); err != nil {
		r.emit(Event{Kind: EventStatusFailed, Intent: t.key, Err: err, Detail: err.Error()})
	}
}

func (r *Reconciler) statusKey(intentKey string) string {
	return r.cfg.StatusPrefix + r.cfg.Holder + "/" + strings.TrimPrefix(intentKey, r.cfg.IntentPrefix)
}

// StatusError is a status write the reconciler refused to make because the
// entry at its status key was written by someone else.
type StatusError struct {
	Key   string
	Owner string
}

// Error names the key and who wrote it.
func (e *StatusError) Error() string {
	return fmt.Sprintf("status %s was written by %s, not this worker: left alone", e.Key, e.Owner)
}

// writeStatus records st for the intent, if it differs from what was last
// written, with compare-and-set: create-only the first time, then on its
// own revision. After a restart it adopts an entry that this worker
// (same Holder) wrote; it never replaces anyone else's.
func (r *Reconciler) writeStatus(t *tracked, st Status) {
	st.IntentKey, st.IntentRevision, st.Worker = t.key, t.rev, r.cfg.Holder
	if t.statusRev != 0 && st == t.status {
		return
	}
	doc, err := statusCodec.Encode(r.cfg.Schemas, st)
	if err != nil {
		r.emit(Event{Kind: EventStatusFailed, Intent: t.key, Err: err, Detail: err.Error()})
		return
	}
	key := r.statusKey(t.key)
	e, err := lease.PutOwned(r.ctx, r.conn, statestore.PutRequest{Namespace: r.cfg.Namespace, Key: key, Schema: StatusSchema, Document: doc},
		t.statusRev, r.ours, func(cur statestore.Entry) error { return &StatusError{Key: key, Owner: cur.Owner} })
	if err != nil {
		r.emit(Event{Kind: EventStatusFailed, Intent: t.key, Err: err, Detail: err.Error()})
		return
	}
	t.status, t.statusRev = st, e.Revision
}

// ours reports whether a status entry was written by this worker: its
// document names our Holder.
func (r *Reconciler) ours(e statestore.Entry) bool {
	st, err := ParseStatus(r.cfg.Schemas, e.Document)
	return err == nil && e.Schema == StatusSchema && st.Worker == r.cfg.Holder
}
