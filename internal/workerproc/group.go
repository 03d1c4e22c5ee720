package workerproc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/worker/grouppref"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// Bounds of the group client's loops.
const (
	// saveAttempts bounds --prefer's reread-merge-save loop against the
	// owner's other devices saving at the same moment.
	saveAttempts = 5
	// watchRetry is the pause before Next is called again after it failed
	// to re-open the watch (PERMISSION_DENIED, say), so a refusal that
	// lasts does not spin.
	watchRetry = time.Second
)

// groupClient is scenario 6's client: it follows its owner's stored
// preferences and joins the group they name. The preference grants
// nothing: membership is the media server's answer to Join.
type groupClient struct {
	c     *client.Client
	m     *mediasim.Remote
	reg   *schema.Registry
	owner string
	out   *emitter

	want    string          // the preferred group as last seen ("" none)
	joined  map[string]bool // groups the media server admitted this process to
	refused string          // the group that refused; asked again once the preference changes
	// retry, after a Join that got no answer, is the media server's
	// Changed channel taken before the attempt: it closes at the server's
	// first answer after the failure.
	retry <-chan struct{}
}

// watchItem is what the watch's reader hands the loop.
type watchItem struct {
	ev  client.WatchEvent
	err error
}

// runGroup saves --prefer, then follows user/<owner>/preferences/group and
// joins what it names until ctx ends.
func runGroup(ctx context.Context, o *options, c *client.Client, m *mediasim.Remote, owner string, out *emitter) error {
	g := &groupClient{c: c, m: m, reg: o.reg, owner: owner, out: out, joined: map[string]bool{}}
	if o.prefer != "" {
		if err := g.savePreference(ctx, o.prefer); err != nil {
			return err
		}
	}
	w, err := c.Watch(ctx, grouppref.Namespace(owner), grouppref.Key)
	if err != nil {
		return fmt.Errorf("watch %s/%s: %w", grouppref.Namespace(owner), grouppref.Key, err)
	}
	items := make(chan watchItem)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			ev, err := w.Next(ctx)
			if errors.Is(err, client.ErrClosed) || ctx.Err() != nil {
				return
			}
			select {
			case items <- watchItem{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				select {
				case <-time.After(watchRetry):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	defer func() {
		w.Close()
		<-readerDone
	}()
	for {
		select {
		case <-ctx.Done():
			out.emit(Line{Kind: KindStopping, Detail: "no lease or binding to end"})
			return nil
		case it := <-items:
			if it.err != nil {
				out.event(reconcile.Event{Kind: reconcile.EventStoreError, Detail: it.err.Error(), Err: it.err})
				continue
			}
			g.apply(it.ev)
		case <-g.retry:
			g.retry = nil
		}
		g.reconcile(ctx)
	}
}

// savePreference stores group as the preferred group, keeping the other
// preferences, with compare-and-set: a CONFLICT means another device of
// the owner saved first, so it rereads and merges again.
func (g *groupClient) savePreference(ctx context.Context, group string) error {
	var err error
	for range saveAttempts {
		var p grouppref.Preferences
		var rev uint64
		if p, rev, err = grouppref.Load(ctx, g.c, g.reg, g.owner); err != nil {
			return fmt.Errorf("load the preferences of %s: %w", g.owner, err)
		}
		if p.PreferredGroup == group && rev != 0 {
			return nil
		}
		p.PreferredGroup = group
		if _, err = grouppref.Save(ctx, g.c, g.reg, g.owner, p, rev); !errors.Is(err, statestore.ErrConflict) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("save %s's preferred group %q: %w", g.owner, group, err)
	}
	return nil
}

// apply takes a watch event: the preference as a snapshot holds it, or as
// an update changed it.
func (g *groupClient) apply(ev client.WatchEvent) {
	want := g.want
	switch ev.Kind {
	case client.EventSnapshot, client.EventResnapshot:
		detail := fmt.Sprintf("snapshot at revision %d", ev.Revision)
		if ev.Kind == client.EventResnapshot {
			detail = fmt.Sprintf("re-snapshot at revision %d after %s", ev.Revision, ev.Cause)
		}
		g.out.event(reconcile.Event{Kind: reconcile.EventResynced, Detail: detail})
		want = ""
		for _, e := range ev.Entries {
			if e.Key == grouppref.Key {
				want = g.parse(e)
			}
		}
	case client.EventUpdate:
		if ev.Key != grouppref.Key {
			return // a longer key under the same prefix: not the preferences
		}
		want = ""
		if ev.Update == watch.Put && ev.Entry != nil {
			want = g.parse(*ev.Entry)
		}
	}
	if want != g.want {
		g.want, g.refused, g.retry = want, "", nil
		shown := want
		if shown == "" {
			shown = "none"
		}
		g.out.emit(Line{Kind: KindPreference, Intent: grouppref.Key, Detail: "preferred group " + shown})
	}
}

// parse returns the preferred group an entry names; a document the
// registry refuses names none (and is reported), as a preference that is
// not one must not lead anywhere.
func (g *groupClient) parse(e statestore.Entry) string {
	p, err := grouppref.Parse(g.reg, e.Document)
	if err != nil {
		g.out.event(reconcile.Event{Kind: reconcile.EventRejected, Intent: e.Key, Detail: err.Error(), Err: err})
		return ""
	}
	return p.PreferredGroup
}

// reconcile joins the preferred group unless it is joined already, it
// refused, or a failed request waits for the media server to answer.
func (g *groupClient) reconcile(ctx context.Context) {
	if g.want == "" || g.joined[g.want] || g.refused == g.want || g.retry != nil {
		return
	}
	changed := g.m.Changed()
	err := g.m.Join(ctx, g.want)
	var refused *mediasim.JoinRefusedError
	switch {
	case err == nil:
		g.joined[g.want] = true
		g.out.emit(Line{Kind: KindJoined, Intent: grouppref.Key, Detail: g.want})
	case errors.As(err, &refused):
		g.refused = g.want
		g.out.emit(Line{Kind: KindJoinRefused, Intent: grouppref.Key, Detail: g.want, Error: err.Error()})
	default:
		g.retry = changed
		g.out.event(reconcile.Event{Kind: reconcile.EventCommandError, Intent: grouppref.Key, Detail: "join " + g.want + ": " + err.Error(), Err: err})
	}
}
