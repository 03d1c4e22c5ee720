package attack

import (
	"context"
	"fmt"
	"strconv"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// fillWatches registers n watches of ns and keyPrefix on ss (watch ids
// prefix0..), pipelined,
// and checks each got its snapshot.
func fillWatches(ss *Session, prefix string, n int, ns, keyPrefix string) error {
	ms := make([]*pb.ClientMessage, n)
	for i := range ms {
		ms[i] = WatchMsg(uint64(i+1), prefix+strconv.Itoa(i), ns, keyPrefix)
	}
	rs, err := ss.Results(ms)
	if err != nil {
		return err
	}
	for id, r := range rs {
		if r.GetWatch() == nil {
			return fmt.Errorf("watch %d answered %v, want a snapshot", id, r)
		}
	}
	return nil
}

// watchQuota is issue 31's third attack: one principal's sessions take
// every watch they can. It gets its quota (a quarter of the store's) and
// then WATCH_LIMIT naming "watches per principal" and itself; an
// administrator and another user still get watches.
func watchQuota(ctx context.Context, e *Env) error {
	lim := quota.Default()
	sessions := lim.MaxWatchesPerPrincipal / lim.MaxWatchesPerSession
	for i := range sessions {
		ss, err := e.S.DialSession(ctx, Alice)
		if err != nil {
			return err
		}
		defer ss.Close()
		if err := fillWatches(ss, "w", lim.MaxWatchesPerSession, "user/"+Alice, ""); err != nil {
			return fmt.Errorf("alice's session %d: %w", i, err)
		}
	}
	extra, err := e.S.DialSession(ctx, Alice)
	if err != nil {
		return err
	}
	defer extra.Close()
	r, err := extra.Call(WatchMsg(1, "over", "user/"+Alice, ""))
	if err != nil {
		return err
	}
	if err := WantError(r, 1, statestore.WatchLimit, watch.BoundWatchesPerPrincipal, strconv.Quote(Alice)); err != nil {
		return fmt.Errorf("alice's watch %d: %w", lim.MaxWatchesPerPrincipal+1, err)
	}
	e.Record("WATCH_LIMIT", "%s after %d watches over %d sessions: %s", r.GetError().GetField(), lim.MaxWatchesPerPrincipal, sessions, r.GetError().GetMessage())
	for _, id := range []string{Admin, Bob} {
		ss, err := e.S.DialSession(ctx, id)
		if err != nil {
			return err
		}
		defer ss.Close()
		r, err := ss.Call(WatchMsg(1, "mine", "user/"+Alice, ""))
		if id == Bob {
			r, err = ss.Call(WatchMsg(1, "mine", "user/"+Bob, ""))
		}
		if err != nil {
			return err
		}
		if r.GetWatch() == nil {
			return fmt.Errorf("%s's watch while alice holds her quota: %v, want a snapshot", id, r)
		}
	}
	return nil
}

// watchBounds: the snapshot bounds (64 entries, 65,536 encoded bytes) are
// WATCH_TOO_BROAD naming which, and a narrower prefix is served; a session's
// 17th watch is WATCH_LIMIT naming "watches per session".
func watchBounds(ctx context.Context, e *Env) error {
	lim := quota.Default()
	admin := e.S.Principal(Admin)
	ns := "user/" + Alice
	for i := range lim.MaxSnapshotEntries + 1 {
		if _, err := e.S.Store.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: "many/" + strconv.Itoa(i), Schema: schema.MediaIntentV1,
			Document: testdoc.MediaIntent(160, i)}); err != nil {
			return err
		}
	}
	// Five documents near the document bound: about 75,000 bytes, over
	// the snapshot's 65,536 in five entries.
	for i := range 5 {
		if _, err := e.S.Store.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: "big/" + strconv.Itoa(i), Schema: schema.MediaIntentV1,
			Document: testdoc.MediaIntent(15000, i)}); err != nil {
			return err
		}
	}
	ss, err := e.S.DialSession(ctx, Alice)
	if err != nil {
		return err
	}
	defer ss.Close()
	cases := []struct {
		prefix, field, contains string
	}{
		{"many/", "watch snapshot entries", fmt.Sprintf("more than %d entries", lim.MaxSnapshotEntries)},
		{"big/", "watch snapshot bytes", fmt.Sprintf("over the %d-byte bound", lim.MaxSnapshotBytes)},
		// Both broken: capture stops at the first bound broken in key
		// order, and big/ comes before many/.
		{"", "watch snapshot bytes", ""},
	}
	id := uint64(0)
	for _, tc := range cases {
		id++
		r, err := ss.Call(WatchMsg(id, "broad"+strconv.Itoa(int(id)), ns, tc.prefix))
		if err != nil {
			return err
		}
		if err := WantError(r, id, statestore.WatchTooBroad, tc.field, tc.contains); err != nil {
			return fmt.Errorf("watch prefix %q: %w", tc.prefix, err)
		}
		e.Record("WATCH_TOO_BROAD "+strconv.Quote(tc.prefix), "%s", r.GetError().GetMessage())
	}
	// Narrowed, each is served: 11 entries (many/1, many/10..19), one big
	// one.
	for _, narrow := range []struct {
		prefix string
		n      int
	}{{"many/1", 11}, {"big/0", 1}} {
		id++
		r, err := ss.Call(WatchMsg(id, "narrow"+strconv.Itoa(int(id)), ns, narrow.prefix))
		if err != nil {
			return err
		}
		if len(r.GetWatch().GetEntries()) != narrow.n {
			return fmt.Errorf("narrowed watch %q: %v, want a snapshot of %d entries", narrow.prefix, r, narrow.n)
		}
	}
	// Two watches are open on ss; fill it to the session bound, then one
	// more.
	other, err := e.S.DialSession(ctx, Alice)
	if err != nil {
		return err
	}
	defer other.Close()
	if err := fillWatches(other, "s", lim.MaxWatchesPerSession, ns, "big/0"); err != nil {
		return err
	}
	r, err := other.Call(WatchMsg(100, "one-more", ns, "big/0"))
	if err != nil {
		return err
	}
	if err := WantError(r, 100, statestore.WatchLimit, watch.BoundWatchesPerSession, strconv.Itoa(lim.MaxWatchesPerSession)); err != nil {
		return fmt.Errorf("watch %d of one session: %w", lim.MaxWatchesPerSession+1, err)
	}
	e.Record("WATCH_LIMIT", "%s: %s", r.GetError().GetField(), r.GetError().GetMessage())
	return nil
}
