package nemesis

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/clusterkill"
	"github.com/keeppeek/statestore/internal/regcheck"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

const (
	ns        = "group/nemesis"
	nKeys     = 5
	leaseTTL  = time.Second // the minimum TTL: leases lapse within a round or two
	opTimeout = 2 * time.Second
)

func casKey(i int) string { return fmt.Sprintf("k/%d", i) }

func doc(id string) []byte {
	return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":%q,"media_kind":"video","priority":1}`, id)
}

func sourceID(e statestore.Entry) string {
	var d struct {
		SourceID string `json:"source_id"`
	}
	json.Unmarshal(e.Document, &d)
	return d.SourceID
}

// dial connects a client to the nodes at eps (their WebSocket addresses),
// retrying as client/ does, with short backoffs so a restarted node is
// found again quickly.
func dial(ctx context.Context, eps ...string) (*client.Client, error) {
	var urls []string
	for _, e := range eps {
		urls = append(urls, "ws://"+e)
	}
	ctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	return client.Dial(ctx, client.Config{Endpoints: urls, Token: clusterkill.Token, DialTimeout: time.Second,
		RequestTimeout: opTimeout, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
}

// state is what the run observed, shared by the workers, the leaser and
// the watchers; mu guards it.
type state struct {
	t0 time.Time
	mu sync.Mutex

	ops      []porcupine.Operation // this round's operations on the hot keys
	rep      *Report
	fails    []string
	seen     map[string]map[uint64]string // key → revision → value, from acks, reads and watches
	written  map[string]map[string]bool   // key → every value sent to it, whatever the outcome
	maxAcked map[string]uint64            // key → the highest acknowledged revision of a put or delete on it
	lastPut  map[string]int64             // key → call time of the write acknowledged at maxAcked, 0 if a delete
	lastDel  map[string]int64             // key → call time of the latest delete that may have applied

	leases   map[string]int64  // lease key → deadline (unix ms), acknowledged or seen in a watch
	ackLease map[string]uint64 // acknowledged leases, with their PUT's revision
	expires  map[string]uint64 // lease key → the revision of the EXPIRE watchers saw
	expSeen  map[string]int    // lease key → watchers that saw its EXPIRE
}

func newState(rep *Report) *state {
	return &state{t0: time.Now(), rep: rep, seen: map[string]map[uint64]string{}, written: map[string]map[string]bool{},
		maxAcked: map[string]uint64{}, lastPut: map[string]int64{}, lastDel: map[string]int64{},
		leases: map[string]int64{}, ackLease: map[string]uint64{}, expires: map[string]uint64{}, expSeen: map[string]int{}}
}

// now is the history's clock: monotonic nanoseconds since the run began.
func (s *state) now() int64 { return int64(time.Since(s.t0)) }

// maxFails bounds the violations kept: a broken run says enough in 50.
const maxFails = 50

func (s *state) failLocked(format string, args ...any) {
	if len(s.fails) < maxFails {
		s.fails = append(s.fails, fmt.Sprintf(format, args...))
	}
	s.rep.violations++
}

func (s *state) failf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLocked(format, args...)
}

// observeLocked records that key held value at rev, failing on two
// different values at one revision.
func (s *state) observeLocked(key string, rev uint64, value, where string) {
	m := s.seen[key]
	if m == nil {
		m = map[uint64]string{}
		s.seen[key] = m
	}
	if old, ok := m[rev]; ok && old != value {
		s.failLocked("%s: %s at revision %d holds %q, but %q was seen there before", where, key, rev, value, old)
		return
	}
	m[rev] = value
}

func (s *state) wrote(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written[key] == nil {
		s.written[key] = map[string]bool{}
	}
	s.written[key][value] = true
}

// worker is one client's compare-and-set, blind-write, delete and read
// loop on the hot keys.
type worker struct {
	id    int
	c     *client.Client
	name  string // its endpoints, for messages
	rng   *rand.Rand
	known map[string]int64 // key → the revision last seen (0 absent), -1 not known
	seq   uint64
}

// run issues operations until ctx ends, recording each into st.
func (w *worker) run(ctx context.Context, st *state, round int) {
	for ctx.Err() == nil {
		key := casKey(w.rng.IntN(nKeys))
		known := w.known[key]
		w.seq++
		call := regcheck.Call{Key: key, Kind: regcheck.Get}
		value := fmt.Sprintf("w%d-%d", w.id, w.seq)
		switch p := w.rng.IntN(100); {
		case p < 35 || known < 0:
		case p < 65:
			call = regcheck.Call{Kind: regcheck.Put, Key: key, Expect: known, Value: value} // compare-and-set, create-only when absent
		case p < 78:
			call = regcheck.Call{Kind: regcheck.Put, Key: key, Expect: regcheck.Blind, Value: value}
		case p < 84:
			call = regcheck.Call{Kind: regcheck.Put, Key: key, Expect: 0, Value: value}
		case known > 0:
			call = regcheck.Call{Kind: regcheck.Del, Key: key, Expect: known}
		}
		w.issue(ctx, st, round, call)
	}
}

// issue runs one call and records it with its call and return times.
func (w *worker) issue(ctx context.Context, st *state, round int, c regcheck.Call) {
	if c.Kind == regcheck.Put {
		st.wrote(c.Key, c.Value)
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	callTs := st.now()
	var res regcheck.Result
	var err error
	switch c.Kind {
	case regcheck.Get:
		var e statestore.Entry
		if e, err = w.c.Get(octx, ns, c.Key); err == nil {
			res = regcheck.Result{Code: regcheck.OK, Rev: e.Revision, Value: sourceID(e)}
		}
	case regcheck.Put:
		req := statestore.PutRequest{Namespace: ns, Key: c.Key, Schema: schema.MediaIntentV1, Document: doc(c.Value)}
		if c.Expect != regcheck.Blind {
			req.Expect = statestore.IfRevision(uint64(c.Expect))
		}
		var e statestore.Entry
		if e, err = w.c.Put(octx, req); err == nil {
			res = regcheck.Result{Code: regcheck.OK, Rev: e.Revision}
		}
	case regcheck.Del:
		var rev uint64
		if rev, err = w.c.Delete(octx, statestore.DeleteRequest{Namespace: ns, Key: c.Key, Expect: statestore.IfRevision(uint64(c.Expect))}); err == nil {
			res = regcheck.Result{Code: regcheck.OK, Rev: rev}
		}
	}
	retTs := st.now()
	var se *statestore.Error
	switch {
	case err == nil:
	case errors.Is(err, statestore.ErrNotFound):
		res = regcheck.Result{Code: regcheck.NotFound}
	case statestore.CodeOf(err) == statestore.Conflict && errors.As(err, &se):
		res = regcheck.Result{Code: regcheck.Conflict, Rev: se.CurrentRevision}
	case c.Kind == regcheck.Get:
		// A read with no answer constrains nothing.
		w.known[c.Key] = -1
		st.unknown("read", err)
		return
	default:
		// Timeouts, lost connections, UNAVAILABLE: the write may have
		// applied, now or later, up to the round's observation.
		res = regcheck.Result{Unknown: true}
		retTs = math.MaxInt64
		st.unknown(c.Kind.String(), err)
	}
	switch {
	case res.Unknown:
		w.known[c.Key] = -1
	case res.Code == regcheck.OK && c.Kind == regcheck.Del, res.Code == regcheck.NotFound:
		w.known[c.Key] = 0
	default:
		w.known[c.Key] = int64(res.Rev)
	}
	st.record(porcupine.Operation{ClientId: w.id, Input: c, Call: callTs, Output: res, Return: retTs,
		Metadata: regcheck.Origin{Cycle: round, Op: w.seq}}, w.name)
}

// unknown counts an operation whose outcome never came, by what it was
// and why.
func (s *state) unknown(what string, err error) {
	why := "other"
	var se *statestore.Error
	if errors.As(err, &se) {
		why = se.Code.String() + "/" + se.Field
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.Unknown[what+" "+why]++
}

// record keeps one operation of the round and what its answer shows.
func (s *state) record(o porcupine.Operation, via string) {
	c, r := o.Input.(regcheck.Call), o.Output.(regcheck.Result)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = append(s.ops, o)
	s.rep.Ops++
	switch {
	case r.Unknown:
		if c.Kind == regcheck.Del {
			s.lastDel[c.Key] = max(s.lastDel[c.Key], o.Call)
		}
	case c.Kind == regcheck.Get:
		s.rep.Reads++
		if r.Code == regcheck.OK {
			s.observeLocked(c.Key, r.Rev, r.Value, "get via "+via)
		}
	case r.Code == regcheck.Conflict:
		s.rep.Conflicts++
	case r.Code == regcheck.OK:
		s.rep.AcknowledgedWrites++
		if c.Kind == regcheck.Put {
			s.observeLocked(c.Key, r.Rev, c.Value, "put via "+via)
		}
		if r.Rev > s.maxAcked[c.Key] {
			s.maxAcked[c.Key] = r.Rev
			s.lastPut[c.Key] = 0
			if c.Kind == regcheck.Put {
				s.lastPut[c.Key] = o.Call
			}
		}
		if c.Kind == regcheck.Del {
			s.lastDel[c.Key] = max(s.lastDel[c.Key], o.Call)
		}
	}
}

// lost reports whether an observation of key shows an acknowledged write
// lost: a revision below one acknowledged, or the key absent though the
// newest acknowledged operation on it was a put and no delete that may
// have applied was called after that put was.
func (s *state) lost(key string, r regcheck.Result) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Code == regcheck.OK:
		return r.Rev < s.maxAcked[key]
	case s.maxAcked[key] == 0:
		return false
	}
	return s.lastPut[key] != 0 && s.lastDel[key] < s.lastPut[key]
}

// leaser acquires a never-renewed lease on a fresh key every period.
func (s *state) leaser(ctx context.Context, c *client.Client, period time.Duration, next *int) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		*next++
		key, value := fmt.Sprintf("lease/%d", *next), fmt.Sprintf("lease-%d", *next)
		s.wrote(key, value)
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		e, err := c.Put(cctx, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: doc(value),
			Expect: statestore.CreateOnly, TTL: leaseTTL})
		cancel()
		if err != nil {
			s.unknown("lease", err)
			continue
		}
		s.mu.Lock()
		s.leases[key] = e.ExpiresMs
		s.ackLease[key] = e.Revision
		s.rep.AcknowledgedLeases++
		s.observeLocked(key, e.Revision, value, "lease")
		s.mu.Unlock()
	}
}

// watcher follows the namespace through one node and checks what it
// delivers: the watch properties and the lease rule.
type watcher struct {
	name string
	w    *client.Watch
	mu   sync.Mutex
	rev  uint64                      // the latest revision delivered
	from uint64                      // the revision of the latest (re-)snapshot
	view map[string]statestore.Entry // the state the events build
	done chan struct{}
}

// follow runs until ctx ends.
func (wt *watcher) follow(ctx context.Context, s *state) {
	defer close(wt.done)
	defer wt.w.Close()
	var seq uint64
	expired := map[string]bool{} // EXPIREs this watcher saw
	for {
		ev, err := wt.w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, client.ErrClosed) {
				s.failf("watch via %s: Next: %v", wt.name, err)
				return
			}
			continue // re-opening the watch failed (its node is down or leaderless): Next tries again
		}
		wt.mu.Lock()
		rev := wt.rev
		switch ev.Kind {
		case client.EventSnapshot, client.EventResnapshot:
			if ev.Kind == client.EventResnapshot {
				s.mu.Lock()
				s.rep.Resnapshots++
				s.mu.Unlock()
				if !(strings.HasPrefix(ev.Cause, "closed ") || ev.Cause == "disconnected" || strings.HasPrefix(ev.Cause, "client buffer full")) {
					s.failf("watch via %s: re-snapshot without a closure: %s", wt.name, ev.Cause)
				}
			}
			if ev.Revision < rev {
				s.failf("watch via %s: re-snapshot at revision %d after revision %d was delivered: revisions went back (%s)", wt.name, ev.Revision, rev, ev.Cause)
			}
			seq, wt.rev, wt.from = 0, ev.Revision, ev.Revision
			wt.view = map[string]statestore.Entry{}
			s.mu.Lock()
			for _, e := range ev.Entries {
				wt.view[e.Key] = e
				s.observeLocked(e.Key, e.Revision, sourceID(e), "snapshot via "+wt.name)
				if e.ExpiresMs != 0 {
					s.leases[e.Key] = e.ExpiresMs
				}
			}
			s.mu.Unlock()
		case client.EventUpdate:
			if ev.Sequence != seq+1 {
				s.failf("watch via %s: sequence %d after %d with no closure", wt.name, ev.Sequence, seq)
			}
			if ev.Revision <= rev {
				s.failf("watch via %s: update of %s at revision %d after revision %d: out of commit order or twice", wt.name, ev.Key, ev.Revision, rev)
			}
			seq, wt.rev = ev.Sequence, ev.Revision
			s.mu.Lock()
			s.rep.WatchUpdates++
			switch ev.Update {
			case watch.Put:
				wt.view[ev.Key] = *ev.Entry
				s.observeLocked(ev.Key, ev.Revision, sourceID(*ev.Entry), "watch via "+wt.name)
				if ev.Entry.ExpiresMs != 0 {
					s.leases[ev.Key] = ev.Entry.ExpiresMs
				}
			case watch.Delete:
				delete(wt.view, ev.Key)
			case watch.Expire:
				delete(wt.view, ev.Key)
				s.expire(wt.name, ev, expired)
			}
			s.mu.Unlock()
		}
		wt.mu.Unlock()
	}
}

// expire checks one EXPIRE against the lease rule: never before its
// deadline (the nodes share this machine's clock, and the watcher received
// it after the leader decided it), and one EXPIRE per lease.
func (s *state) expire(via string, ev client.WatchEvent, expired map[string]bool) {
	now := time.Now().UnixMilli()
	dl, ok := s.leases[ev.Key]
	switch {
	case !ok && s.written[ev.Key] != nil:
		// A lease whose PUT had an unknown outcome and no watcher saw:
		// its deadline is not known.
	case !ok:
		s.failLocked("watch via %s: EXPIRE of %s at revision %d, a key no lease was put on", via, ev.Key, ev.Revision)
	case now < dl:
		s.rep.EarlyExpiries++
		s.failLocked("watch via %s: EXPIRE of %s at revision %d received at %d ms, before its deadline %d ms", via, ev.Key, ev.Revision, now, dl)
	}
	if r, ok := s.expires[ev.Key]; ok && r != ev.Revision {
		s.failLocked("watch via %s: %s expired at revision %d, and at revision %d elsewhere: two EXPIREs", via, ev.Key, ev.Revision, r)
	}
	if _, ok := s.expires[ev.Key]; !ok {
		s.rep.Expiries++
	}
	s.expires[ev.Key] = ev.Revision
	if expired[ev.Key] {
		s.failLocked("watch via %s: a second EXPIRE of %s at revision %d", via, ev.Key, ev.Revision)
	} else {
		s.expSeen[ev.Key]++
	}
	expired[ev.Key] = true
}

// roundOps hands over the round's operations, the unknown outcomes given
// the observation's time as their return: they may take effect until
// then and, the round quiesced, not after.
func (s *state) roundOps(observe int64) []porcupine.Operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := s.ops
	s.ops = nil
	for i := range ops {
		if ops[i].Return == math.MaxInt64 {
			ops[i].Return = observe
		}
	}
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	return ops
}
