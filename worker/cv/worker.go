package cv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/reconcile"
	"github.com/keeppeek/statestore/worker/watchcache"
)

// DefaultHealthEvery is how often, at most, a worker rewrites a health
// entry whose only change is its counters: frames arrive many times a
// second, and the state store is a control plane, not a metrics pipe. A
// change of state is written at once.
const DefaultHealthEvery = 5 * time.Second

// Config configures a Worker.
type Config struct {
	// Namespace holds the intents, the leases and the health entries.
	Namespace string
	// IntentPrefix selects the intents to follow ("intents/" by default).
	IntentPrefix string
	// StatusPrefix is where health goes ("status/" by default): each
	// worker writes StatusPrefix + Holder + "/" + the intent's name.
	StatusPrefix string
	// LeasePrefix is where the leases are ("leases/" by default): one per
	// source, media kind and model profile (LeaseKey), so one worker
	// analyses a stream with a model and the catalog gets each event once.
	LeasePrefix string
	// Holder is this worker instance's ID, required: an identifier, as it
	// is written into every event and health entry.
	Holder string
	// Lease is the lease timing template (TTL, RenewEvery, Jitter, Rand).
	Lease lease.Config
	// HealthEvery bounds how often counters alone are rewritten; 0 means
	// DefaultHealthEvery.
	HealthEvery time.Duration

	Schemas      *schema.Registry // must hold RegisterSchemas' schemas
	Capabilities Capabilities
	Media        Media
	// Models are the model profiles this worker runs, by profile ID.
	Models map[string]Model
	Clock  clock.Clock // nil: the wall clock
	// Observe, when set, receives every Report, from the Run goroutine,
	// after the pass that produced it has armed its timers.
	Observe func(Report)
}

// ConfigError is a Config that cannot make a worker.
type ConfigError struct {
	Field  string
	Reason string
}

// Error names the field.
func (e *ConfigError) Error() string { return "cv config: " + e.Field + ": " + e.Reason }

// ReportKind says what a worker did.
type ReportKind string

// Report kinds.
const (
	ReportResynced      ReportKind = "resynced"       // an intent snapshot was (re)installed
	ReportClaimed       ReportKind = "claimed"        // took the intent's lease
	ReportStandby       ReportKind = "standby"        // another worker holds it
	ReportRenewed       ReportKind = "renewed"        // renewed the lease
	ReportLeaseLost     ReportKind = "lease-lost"     // lease lapsed or taken; the analysis stopped
	ReportReleased      ReportKind = "released"       // released the lease
	ReportSubscribed    ReportKind = "subscribed"     // Subscribe succeeded and the analysis started
	ReportStopped       ReportKind = "stopped"        // the analysis stopped, its subscription ended or unsubscribed
	ReportWaiting       ReportKind = "waiting"        // capabilities do not allow subscribing yet
	ReportRejected      ReportKind = "rejected"       // the intent is invalid
	ReportCommandError  ReportKind = "command-error"  // the media server refused a command
	ReportAnalyzed      ReportKind = "analyzed"       // the counters moved; Health carries them
	ReportEventRejected ReportKind = "event-rejected" // an event failed validation and was not published
	ReportHealth        ReportKind = "health"         // the health entry was written; Health is what
	ReportStatusFailed  ReportKind = "status-failed"  // the health entry could not be written
	ReportStoreError    ReportKind = "store-error"    // a watch or lease write failed
)

// Report is one thing a worker did, for tests and logs.
type Report struct {
	Kind   ReportKind
	Intent string // intent key, "" for watch reports
	Detail string
	Err    error
	// Health is the intent's health as of the report, for ReportAnalyzed
	// and ReportHealth.
	Health Health
}

// String renders the report as "kind intent: detail".
func (r Report) String() string {
	s := string(r.Kind)
	if r.Intent != "" {
		s += " " + r.Intent
	}
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	return s
}

type inboxItem struct {
	msg          watch.Message
	disconnected bool
	reconnected  bool
}

// Worker is one computer-vision worker's loop. Create it with New,
// connect it (it is the session's Link), then Run it.
type Worker struct {
	cfg Config

	mu    sync.Mutex
	inbox []inboxItem
	wake  chan struct{}

	// Run goroutine only:
	conn        reconcile.Conn
	ctx         context.Context
	intents     *watchcache.Cache
	leases      *watchcache.Cache
	tracked     map[string]*tracked
	reports     []Report
	capsChanged <-chan struct{}
}

// tracked is what the worker knows of one intent key.
type tracked struct {
	key      string
	rev      uint64 // intent entry revision parsed
	in       intent.Intent
	target   Target
	parseErr error
	lease    *lease.Lease
	standby  bool
	an       *analysis
	totals   Counters // of this intent's analyses that ended
	reported Counters // as of the last ReportAnalyzed
	lastNote string   // deduplicates Waiting/Rejected/CommandError reports

	// What this pass decided, the health entry's fields besides counters.
	state  State
	reason string

	written   Health // the health entry as last written
	statusRev uint64 // its revision; 0: none written
	writtenAt time.Time
	healthDue time.Time // when counters alone may be written next; zero: nothing pending

	// failedOn is the Changed channel of the pass in which Subscribe
	// failed for intent revision failedRev: retried once it is closed
	// (capabilities changed) or the intent changed.
	failedOn  <-chan struct{}
	failedRev uint64
}

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

// counters are the intent's totals: ended analyses and the running one.
func (t *tracked) counters() Counters {
	if t.an == nil {
		return t.totals
	}
	return t.totals.add(t.an.counters())
}

// New checks cfg and returns a worker.
func New(cfg Config) (*Worker, error) {
	if cfg.IntentPrefix == "" {
		cfg.IntentPrefix = "intents/"
	}
	if cfg.StatusPrefix == "" {
		cfg.StatusPrefix = "status/"
	}
	if cfg.LeasePrefix == "" {
		cfg.LeasePrefix = "leases/"
	}
	if cfg.HealthEvery == 0 {
		cfg.HealthEvery = DefaultHealthEvery
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	overlaps := func(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }
	switch {
	case cfg.Namespace == "":
		return nil, &ConfigError{"namespace", "required"}
	case strings.HasPrefix(cfg.Namespace, statestore.MQTTNamespacePrefix):
		return nil, &ConfigError{"namespace", fmt.Sprintf("%q is MQTT integration state, which takes no lease", cfg.Namespace)}
	case !identifier(cfg.Holder):
		return nil, &ConfigError{"holder", fmt.Sprintf("%q must be 1 to 128 of [A-Za-z0-9._-], not . or ..", cfg.Holder)}
	case cfg.Schemas == nil || !cfg.Schemas.Has(HealthSchema) || !cfg.Schemas.Has(lease.Schema):
		return nil, &ConfigError{"schemas", "must hold " + HealthSchema + " and " + lease.Schema + " (RegisterSchemas)"}
	case cfg.Capabilities == nil:
		return nil, &ConfigError{"capabilities", "required"}
	case cfg.Media == nil:
		return nil, &ConfigError{"media", "required"}
	case len(cfg.Models) == 0:
		return nil, &ConfigError{"models", "required: the model profiles this worker runs"}
	case cfg.HealthEvery < 0:
		return nil, &ConfigError{"health_every", fmt.Sprintf("%v must be positive", cfg.HealthEvery)}
	case overlaps(cfg.StatusPrefix, cfg.IntentPrefix):
		return nil, &ConfigError{"status_prefix", fmt.Sprintf("%q overlaps the intent prefix %q: health must never land on an intent", cfg.StatusPrefix, cfg.IntentPrefix)}
	case overlaps(cfg.LeasePrefix, cfg.IntentPrefix):
		return nil, &ConfigError{"lease_prefix", fmt.Sprintf("%q overlaps the intent prefix %q", cfg.LeasePrefix, cfg.IntentPrefix)}
	case overlaps(cfg.LeasePrefix, cfg.StatusPrefix):
		return nil, &ConfigError{"lease_prefix", fmt.Sprintf("%q overlaps the status prefix %q", cfg.LeasePrefix, cfg.StatusPrefix)}
	}
	for _, id := range slices.Sorted(maps.Keys(cfg.Models)) {
		if !identifier(id) || cfg.Models[id] == nil {
			return nil, &ConfigError{"models", fmt.Sprintf("profile %q: want an identifier and a model", id)}
		}
	}
	return &Worker{cfg: cfg, wake: make(chan struct{}, 1), tracked: map[string]*tracked{}}, nil
}

func (w *Worker) enqueue(it inboxItem) {
	w.mu.Lock()
	w.inbox = append(w.inbox, it)
	w.mu.Unlock()
	w.poke()
}

// poke wakes the loop; analyses call it when their counters move.
func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Deliver queues a watch message (it is the session's watch.Sink). The
// queue is bounded by the server: each watch holds at most its
// unacknowledged-update bound, plus a snapshot and a closure.
func (w *Worker) Deliver(m watch.Message) error {
	w.enqueue(inboxItem{msg: m})
	return nil
}

// Disconnected tells the worker its control channel was lost.
func (w *Worker) Disconnected() { w.enqueue(inboxItem{disconnected: true}) }

// Reconnected tells the worker a new control channel is up: it takes
// fresh snapshots and reconciles.
func (w *Worker) Reconnected() { w.enqueue(inboxItem{reconnected: true}) }

// Run follows the intents until ctx ends. It then halts every analysis,
// so no event is published once it has returned, and leaves
// subscriptions, leases and health as they are, as a crashed worker
// would: leases lapse by their TTL and the media server ends a departed
// worker's subscriptions with its session. It returns an error only if
// the first snapshots cannot be taken.
func (w *Worker) Run(ctx context.Context, conn reconcile.Conn) error {
	w.conn, w.ctx = conn, ctx
	w.intents = watchcache.New(conn, w.cfg.Namespace, w.cfg.IntentPrefix, watchcache.WithWatchID(w.cfg.Holder+"-cv-intents"))
	if err := w.intents.Start(); err != nil {
		return fmt.Errorf("cv: watch %s/%s: %w", w.cfg.Namespace, w.cfg.IntentPrefix, err)
	}
	w.leases = watchcache.New(conn, w.cfg.Namespace, w.cfg.LeasePrefix, watchcache.WithWatchID(w.cfg.Holder+"-cv-leases"))
	if err := w.leases.Start(); err != nil {
		return fmt.Errorf("cv: watch %s/%s: %w", w.cfg.Namespace, w.cfg.LeasePrefix, err)
	}
	defer w.haltAll()
	w.report(Report{Kind: ReportResynced, Detail: fmt.Sprintf("snapshot at revision %d", w.intents.Revision())})
	var (
		timer  clock.Timer
		timerC <-chan time.Time
	)
	for {
		capsChanged := w.cfg.Capabilities.Changed()
		w.capsChanged = capsChanged
		w.pass()
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
		if at, ok := w.nextTimer(); ok {
			timer = clock.TimerAt(w.cfg.Clock, at)
			timerC = timer.C()
		}
		w.flush()
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-w.wake:
			w.drain()
		case <-capsChanged:
		case <-timerC:
			timer, timerC = nil, nil
		}
	}
}

func (w *Worker) report(r Report) { w.reports = append(w.reports, r) }

func (w *Worker) flush() {
	rs := w.reports
	w.reports = nil
	if w.cfg.Observe != nil {
		for _, r := range rs {
			w.cfg.Observe(r)
		}
	}
}

// haltAll stops every analysis, and nothing else: Run is ending.
func (w *Worker) haltAll() {
	for _, t := range w.tracked {
		if t.an != nil {
			t.an.halt()
			t.totals, t.an = t.counters(), nil
		}
	}
}

// drain hands queued messages to both caches (each ignores the other's
// watch ids) and applies connection changes.
func (w *Worker) drain() {
	w.mu.Lock()
	items := w.inbox
	w.inbox = nil
	w.mu.Unlock()
	for _, it := range items {
		for _, c := range []*watchcache.Cache{w.intents, w.leases} {
			before := c.Resnapshots()
			var err error
			switch {
			case it.disconnected:
				err = c.Disconnected()
			case it.reconnected:
				err = c.Start()
				if err == nil && c == w.intents {
					w.report(Report{Kind: ReportResynced, Detail: fmt.Sprintf("fresh snapshot at revision %d after reconnect", c.Revision())})
				}
			default:
				err = c.Handle(it.msg)
			}
			if err != nil && !errors.Is(err, watchcache.ErrAck) {
				w.report(Report{Kind: ReportStoreError, Err: err, Detail: err.Error()})
			}
			if c == w.intents && c.Resnapshots() != before {
				w.report(Report{Kind: ReportResynced, Detail: fmt.Sprintf("re-snapshot at revision %d", c.Revision())})
			}
		}
	}
}

// nextTimer is when the loop must wake on its own: the next lease renewal
// or the next health write of counters alone, whichever is first.
func (w *Worker) nextTimer() (time.Time, bool) {
	var next time.Time
	earlier := func(at time.Time) {
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	for _, t := range w.tracked {
		if t.lease != nil && t.lease.Held() {
			earlier(t.lease.RenewAt())
		}
		earlier(t.healthDue)
	}
	return next, !next.IsZero()
}

// pass reconciles every intent once.
func (w *Worker) pass() {
	w.renewDue()
	if !w.intents.Synced() {
		// A stale copy must not start or stop anything; the analyses
		// running go on, and say so.
		for _, t := range w.tracked {
			w.noteCounters(t)
		}
		return
	}
	present := map[string]bool{}
	for _, key := range w.intents.Keys() {
		present[key] = true
		e, _ := w.intents.Get(key)
		t := w.tracked[key]
		if t == nil {
			t = &tracked{key: key}
			w.tracked[key] = t
		}
		if e.Revision != t.rev {
			t.rev = e.Revision
			t.in, t.parseErr = intent.Parse(w.cfg.Schemas, e.Document)
			if t.parseErr == nil {
				t.target, t.parseErr = TargetOf(t.in)
			}
		}
		w.act(t)
		w.noteCounters(t)
		w.writeHealth(t)
	}
	for key, t := range w.tracked {
		if !present[key] {
			w.teardown(t)
			delete(w.tracked, key)
		}
	}
}

// renewDue renews every held lease whose renewal is due.
func (w *Worker) renewDue() {
	now := w.cfg.Clock.Now()
	for _, t := range w.tracked {
		if n, ok := lease.RenewIfDue(w.ctx, t.lease, now); ok {
			w.noteLease(t, n)
		}
	}
}

// leaseReports are the reports of the lease bookkeeping's notes.
var leaseReports = [...]ReportKind{lease.NoteRenewed: ReportRenewed, lease.NoteReleased: ReportReleased, lease.NoteStoreError: ReportStoreError}

// noteLease reports what the lease bookkeeping did; a lost lease also
// ends the analysis it guarded.
func (w *Worker) noteLease(t *tracked, n lease.Note) {
	if n.Kind == lease.NoteLost {
		w.loseLease(t, n.Err)
		return
	}
	w.report(Report{Kind: leaseReports[n.Kind], Intent: t.key, Err: n.Err, Detail: n.Detail})
}

func (w *Worker) loseLease(t *tracked, lost error) {
	w.report(Report{Kind: ReportLeaseLost, Intent: t.key, Err: lost, Detail: lost.Error()})
	w.endAnalysis(t, "lease lost", true)
}

// set records what this pass decided for the intent's health.
func (t *tracked) set(st State, reason string) { t.state, t.reason = st, reason }

// act brings one intent's analysis in line with its document, its lease
// and the current capabilities.
func (w *Worker) act(t *tracked) {
	if t.parseErr != nil {
		w.endAnalysis(t, "intent invalid", true)
		w.release(t)
		w.note(t, ReportRejected, t.parseErr.Error(), t.parseErr)
		t.set(Invalid, t.parseErr.Error())
		return
	}
	if !t.in.Desired {
		w.endAnalysis(t, "intent not desired", true)
		w.release(t)
		t.set(Stopped, "desired is false")
		return
	}
	model := w.cfg.Models[t.target.Model]
	if model == nil {
		// Another worker may run it: no lease is claimed for it here.
		reason := fmt.Sprintf("model profile %q is not one this worker runs", t.target.Model)
		w.endAnalysis(t, "model not run here", true)
		w.release(t)
		w.note(t, ReportRejected, reason, nil)
		t.set(Invalid, reason)
		return
	}
	if !w.holdLease(t) {
		return
	}
	src, ok := w.cfg.Capabilities.Source(t.target.SourceID)
	if a := t.an; a != nil && (!ok || a.session != src.SessionID || a.ended()) {
		// The server ended the subscription, with its source session or
		// on its own: nothing to unsubscribe, resolve afresh.
		why := fmt.Sprintf("subscription %s ended with source session %s", a.sub, a.session)
		if ok && a.session == src.SessionID {
			why = fmt.Sprintf("subscription %s ended by the server", a.sub)
		}
		w.endAnalysis(t, why, false)
	}
	var profiles []ModelProfile
	if ok {
		profiles = w.cfg.Capabilities.ModelProfiles(t.target.SourceID)
	}
	p := decide(t.target, src, ok, profiles)
	if p.req == nil {
		kind := ReportWaiting
		if p.state == Invalid {
			kind = ReportRejected
			w.endAnalysis(t, "intent invalid", true)
		}
		w.note(t, kind, p.reason, nil)
		t.set(p.state, p.reason)
		return
	}
	if a := t.an; a != nil {
		if a.target == t.target && (t.target.VariantID == "" || a.variant == t.target.VariantID) {
			t.set(Active, "")
			return
		}
		w.endAnalysis(t, "intent changed", true)
	}
	if !t.retryable() {
		return // the health already says Failed, and why
	}
	b, err := w.cfg.Media.Subscribe(w.ctx, *p.req)
	var frames <-chan Frame
	if err == nil {
		if frames, err = w.cfg.Media.Frames(b.ID); err != nil {
			err = fmt.Errorf("frames of subscription %s: %w", b.ID, err)
			_ = w.cfg.Media.Unsubscribe(w.ctx, b.ID) // it is of no use without them
		}
	}
	if err != nil {
		t.failedOn, t.failedRev = w.capsChanged, t.rev
		w.note(t, ReportCommandError, err.Error(), err)
		t.set(Failed, err.Error())
		return
	}
	env := analysisEnv{ctx: w.ctx, media: w.cfg.Media, clock: w.cfg.Clock, worker: w.cfg.Holder, poke: w.poke}
	t.an = startAnalysis(env, t.target, model, b.ID, src.SessionID, b.VariantID, frames)
	t.lastNote, t.failedOn = "", nil
	w.report(Report{Kind: ReportSubscribed, Intent: t.key, Detail: fmt.Sprintf("%s variant %s on session %s, model %s", b.ID, b.VariantID, src.SessionID, t.target.Model)})
	t.set(Active, "")
}

// plan is what one pass decided for one desired intent: the Subscribe to
// send, or why not yet.
type plan struct {
	state  State // Waiting or Invalid when req is nil
	reason string
	req    *reconcile.SubscribeRequest
}

// decide validates a target against the source's current advertisement
// (ok false: no session) and the model profiles advertised for it.
// Invalid is for what no capability change can fix; Waiting for what a
// later advertisement may.
func decide(t Target, src reconcile.Source, ok bool, profiles []ModelProfile) plan {
	if !ok {
		return plan{state: Waiting, reason: fmt.Sprintf("source %q has no session", t.SourceID)}
	}
	if !src.HasStream(t.MediaKind) {
		return plan{state: Waiting, reason: fmt.Sprintf("source %q carries no %s stream", t.SourceID, t.MediaKind)}
	}
	i := slices.IndexFunc(profiles, func(p ModelProfile) bool { return p.ID == t.Model })
	if i < 0 {
		return plan{state: Waiting, reason: fmt.Sprintf("model profile %q is not advertised for source %q", t.Model, t.SourceID)}
	}
	if k := profiles[i].MediaKind; k != t.MediaKind {
		return plan{state: Invalid, reason: fmt.Sprintf("model profile %q analyses %s, the intent names a %s stream", t.Model, k, t.MediaKind)}
	}
	req := &reconcile.SubscribeRequest{SourceSessionID: src.SessionID, MediaKind: t.MediaKind, VariantID: t.VariantID}
	if t.VariantID == "" {
		for _, v := range src.Variants {
			if v.MediaKind == t.MediaKind && v.Ready {
				return plan{req: req}
			}
		}
		return plan{state: Waiting, reason: fmt.Sprintf("no ready %s variant of source %q", t.MediaKind, t.SourceID)}
	}
	v, found := src.Variant(t.VariantID)
	switch {
	case !found:
		return plan{state: Waiting, reason: fmt.Sprintf("variant %q is not advertised", t.VariantID)}
	case v.MediaKind != t.MediaKind:
		return plan{state: Invalid, reason: fmt.Sprintf("variant %q is %s, the intent asks for %s", v.ID, v.MediaKind, t.MediaKind)}
	case !v.Ready:
		return plan{state: Waiting, reason: fmt.Sprintf("variant %q is not ready", t.VariantID)}
	}
	return plan{req: req}
}

// note reports a Waiting, Rejected or CommandError once per distinct
// reason, so a pass that changes nothing says nothing.
func (w *Worker) note(t *tracked, kind ReportKind, detail string, err error) {
	if s := string(kind) + detail; s != t.lastNote {
		t.lastNote = s
		w.report(Report{Kind: kind, Intent: t.key, Detail: detail, Err: err})
	}
}

// noteCounters reports counters that moved since the last report, and a
// rejected event with why.
func (w *Worker) noteCounters(t *tracked) {
	c := t.counters()
	if c == t.reported {
		return
	}
	if c.EventsRejected > t.reported.EventsRejected {
		w.report(Report{Kind: ReportEventRejected, Intent: t.key, Detail: c.LastRejection})
	}
	t.reported = c
	w.report(Report{Kind: ReportAnalyzed, Intent: t.key, Health: w.health(t)})
}

// LeaseKey is the lease key of a target: one lease per source, media kind
// and model profile, so two workers never analyse the same stream with the
// same model and the catalog never gets an event twice.
func LeaseKey(prefix string, t Target) string {
	return prefix + t.SourceID + "-" + string(t.MediaKind) + "-" + t.Model
}

// holdLease makes sure this worker holds the target's lease, claiming it
// when the watch shows it free, and reports whether it does. When it does
// not, the health says Standby (or why the claim failed).
func (w *Worker) holdLease(t *tracked) bool {
	key := LeaseKey(w.cfg.LeasePrefix, t.target)
	if t.lease != nil && t.lease.Key() != key {
		w.endAnalysis(t, "intent changed", true)
		w.release(t) // the intent now names another stream or model
	}
	if t.lease == nil {
		cfg := w.cfg.Lease
		cfg.Namespace, cfg.Key, cfg.Holder, cfg.IntentKey = w.cfg.Namespace, key, w.cfg.Holder, t.key
		l, err := lease.New(w.conn, w.cfg.Schemas, cfg)
		if err != nil {
			w.note(t, ReportRejected, err.Error(), err)
			t.set(Invalid, err.Error())
			return false
		}
		t.lease = l
	}
	e, _ := w.leases.Get(key)
	h := t.lease.Hold(w.ctx, e, w.leases.Revision(), w.cfg.Clock.Now(), func(lost error) { w.loseLease(t, lost) })
	switch {
	case h.Standby:
		w.standby(t, e)
		return false
	case h.Err != nil:
		w.report(Report{Kind: ReportStoreError, Intent: t.key, Err: h.Err, Detail: "claim: " + h.Err.Error()})
		t.set(Waiting, "lease claim failed: "+h.Err.Error())
		return false
	case h.Claimed:
		t.standby = false
		w.report(Report{Kind: ReportClaimed, Intent: t.key, Detail: fmt.Sprintf("%s revision %d", key, t.lease.Revision())})
	}
	return true
}

func (w *Worker) standby(t *tracked, e *statestore.Entry) {
	reason := "lease " + t.lease.Key() + " is held by another worker"
	if e != nil {
		reason = "lease " + t.lease.Key() + " is held by " + e.Owner
	}
	if !t.standby {
		t.standby = true
		w.report(Report{Kind: ReportStandby, Intent: t.key, Detail: reason})
	}
	t.set(Standby, reason)
}

// endAnalysis halts the intent's analysis, if any, and then, when the
// subscription may still be live, unsubscribes: no event is published
// once the analysis halted, so none follows a lost lease.
func (w *Worker) endAnalysis(t *tracked, why string, unsubscribe bool) {
	a := t.an
	if a == nil {
		return
	}
	a.halt()
	t.totals, t.an = t.totals.add(a.counters()), nil
	if unsubscribe {
		err := w.cfg.Media.Unsubscribe(w.ctx, a.sub)
		var ce *reconcile.CommandError
		if err != nil && !(errors.As(err, &ce) && ce.Code == reconcile.SubscribeNotFound) {
			w.report(Report{Kind: ReportCommandError, Intent: t.key, Err: err, Detail: err.Error()})
		}
	}
	w.report(Report{Kind: ReportStopped, Intent: t.key, Detail: fmt.Sprintf("%s (%s)", a.sub, why)})
}

func (w *Worker) release(t *tracked) {
	l := t.lease
	t.lease, t.standby = nil, false
	if n, ok := lease.Drop(w.ctx, l); ok {
		w.noteLease(t, n)
	}
}

// teardown handles an intent that disappeared: nobody wants it any more.
func (w *Worker) teardown(t *tracked) {
	w.endAnalysis(t, "intent gone", true)
	w.release(t)
	if err := lease.DeleteOwned(w.ctx, w.conn, w.cfg.Namespace, w.statusKey(t.key), t.statusRev); err != nil {
		w.report(Report{Kind: ReportStatusFailed, Intent: t.key, Err: err, Detail: err.Error()})
	}
}

func (w *Worker) statusKey(intentKey string) string {
	return w.cfg.StatusPrefix + w.cfg.Holder + "/" + strings.TrimPrefix(intentKey, w.cfg.IntentPrefix)
}

// maxText bounds the reasons a health entry carries (its schema's 512).
const maxText = 500

func clip(s string) string {
	if len(s) <= maxText {
		return s
	}
	s = s[:maxText]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// health is the intent's health entry as of now.
func (w *Worker) health(t *tracked) Health {
	h := Health{IntentKey: t.key, IntentRevision: t.rev, Worker: w.cfg.Holder, Model: t.target.Model,
		State: t.state, Reason: clip(t.reason), Counters: t.counters()}
	if t.parseErr != nil {
		h.Model = ""
	}
	if a := t.an; a != nil {
		h.SubscriptionID, h.VariantID = a.sub, a.variant
	}
	h.LastRejection = clip(h.LastRejection)
	return h
}

// writeHealth writes the intent's health if it changed: at once when
// anything but the counters did, else once HealthEvery has passed since
// the last write. It writes with compare-and-set only, create-only the
// first time and then on its own revision, and never replaces an entry
// another worker wrote.
func (w *Worker) writeHealth(t *tracked) {
	h := w.health(t)
	now := w.cfg.Clock.Now()
	if t.statusRev != 0 {
		if h == t.written {
			t.healthDue = time.Time{}
			return
		}
		countersOnly := t.written
		countersOnly.Counters = h.Counters
		if countersOnly == h && now.Before(t.writtenAt.Add(w.cfg.HealthEvery)) {
			t.healthDue = t.writtenAt.Add(w.cfg.HealthEvery)
			return
		}
	}
	doc, err := healthCodec.Encode(w.cfg.Schemas, h)
	if err != nil {
		w.report(Report{Kind: ReportStatusFailed, Intent: t.key, Err: err, Detail: err.Error()})
		return
	}
	key := w.statusKey(t.key)
	e, err := lease.PutOwned(w.ctx, w.conn, statestore.PutRequest{Namespace: w.cfg.Namespace, Key: key, Schema: HealthSchema, Document: doc},
		t.statusRev, w.ours, func(cur statestore.Entry) error { return &reconcile.StatusError{Key: key, Owner: cur.Owner} })
	if err != nil {
		w.report(Report{Kind: ReportStatusFailed, Intent: t.key, Err: err, Detail: err.Error()})
		return
	}
	t.written, t.statusRev, t.writtenAt, t.healthDue = h, e.Revision, now, time.Time{}
	w.report(Report{Kind: ReportHealth, Intent: t.key, Health: h})
}

// ours reports whether a health entry was written by this worker: its
// document names our Holder.
func (w *Worker) ours(e statestore.Entry) bool {
	h, err := ParseHealth(w.cfg.Schemas, e.Document)
	return err == nil && e.Schema == HealthSchema && h.Worker == w.cfg.Holder
}
