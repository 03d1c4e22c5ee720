package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/cliflag"
)

// The pause between attempts to re-open a watch the server refused
// UNAVAILABLE (a restarted store still opening): doubling, capped.
const (
	reopenMinPause = 100 * time.Millisecond
	reopenMaxPause = 5 * time.Second
)

// watchLine is one line of watch --json: its event says which fields it
// carries.
type watchLine struct {
	Event      string     `json:"event"` // snapshot, entry, update, resnapshot
	Namespace  string     `json:"namespace,omitempty"`
	Prefix     *string    `json:"prefix,omitempty"`      // snapshot
	Sequence   uint64     `json:"sequence,omitempty"`    // update
	Kind       string     `json:"kind,omitempty"`        // update: PUT, DELETE, EXPIRE
	Revision   uint64     `json:"revision,omitempty"`    // snapshot, resnapshot, update
	Key        string     `json:"key,omitempty"`         // update
	EntryCount *int       `json:"entry_count,omitempty"` // snapshot, resnapshot
	Cause      string     `json:"cause,omitempty"`       // resnapshot
	Entry      *entryJSON `json:"entry,omitempty"`       // entry; an update's PUT
}

func runWatch(args []string, stdout, stderr io.Writer) int {
	c, o := newClientCommand("watch", cliflag.Help{Synopsis: "NS [--prefix P] [--count N] [--json]",
		About: `Watches a namespace (or the keys under --prefix) and prints what the store sends: first the snapshot,
a line with its revision and number of entries then one line per entry (revision, key, owner, document
size); then one line per committed change (the watch sequence, PUT, DELETE or EXPIRE, the revision, the
key), in order. Whenever the watch cannot be followed (the connection was lost and came back, the
server closed the watch, a sequence gap) a resnapshot line says so and why, and the new snapshot's
entries follow: replace what you held. Each update is acknowledged once printed. Runs until SIGINT or
SIGTERM (exit 0), or until --count updates were printed. --json prints one JSON object per line (an
"event" of snapshot, entry, update or resnapshot), entries with their documents.`,
		Examples: []string{"kpstate watch service/transcoder-a --prefix intents/ --token-file ops.token",
			"kpstate watch user/alice --json --count 1   # wait for the next change, then exit"}}, stdout, stderr)
	prefix := c.FS.String("prefix", "", "watch only the keys beginning with `P`")
	count := c.FS.Int("count", 0, "exit 0 after `N` updates (0: until SIGINT or SIGTERM)")
	if code := o.parse(args, 1); code >= 0 {
		return code
	}
	if *count < 0 {
		return c.UsageError("--count %d: want 0 or more", *count)
	}
	ns := c.FS.Arg(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.follow = true
	cl, err := o.dial(ctx)
	if err != nil {
		return o.interrupted(ctx, err)
	}
	defer cl.Close()
	w, err := cl.Watch(ctx, ns, *prefix)
	if err != nil {
		return o.interrupted(ctx, err)
	}
	defer w.Close()
	p := watchPrinter{o: o, ns: ns, prefix: *prefix}
	pause, updates := reopenMinPause, 0
	for {
		ev, err := w.Next(ctx)
		if ctx.Err() != nil {
			return exitOK
		}
		if err != nil {
			if statestore.CodeOf(err) != statestore.Unavailable || errors.Is(err, client.ErrClosed) {
				return o.fail(err)
			}
			// Re-opening failed for now (a store still opening, a
			// connection lost again): Next tries again.
			o.note("re-opening the watch: %v; again in %v", err, pause)
			select {
			case <-ctx.Done():
				return exitOK
			case <-time.After(pause):
			}
			pause = min(2*pause, reopenMaxPause)
			continue
		}
		pause = reopenMinPause
		if code := p.print(ev); code != exitOK {
			return code
		}
		if ev.Kind == client.EventUpdate {
			if updates++; *count > 0 && updates >= *count {
				return exitOK
			}
		}
	}
}

// interrupted is fail, except that an error caused by SIGINT or SIGTERM
// is the exit the signal asked for.
func (o *clientOptions) interrupted(ctx context.Context, err error) int {
	if ctx.Err() != nil {
		return exitOK
	}
	return o.fail(err)
}

// watchPrinter prints a Watch's events in watch's human or JSON form.
type watchPrinter struct {
	o          *clientOptions
	ns, prefix string
}

func (p watchPrinter) print(ev client.WatchEvent) int {
	o := p.o
	switch ev.Kind {
	case client.EventSnapshot, client.EventResnapshot:
		n := len(ev.Entries)
		var code int
		switch {
		case o.json && ev.Kind == client.EventSnapshot:
			code = o.printJSON(watchLine{Event: "snapshot", Namespace: p.ns, Prefix: &p.prefix, Revision: ev.Revision, EntryCount: &n})
		case o.json:
			code = o.printJSON(watchLine{Event: "resnapshot", Namespace: p.ns, Revision: ev.Revision, EntryCount: &n, Cause: ev.Cause})
		case ev.Kind == client.EventSnapshot:
			code = o.printf("snapshot of %s%s at revision %d: %s\n", p.ns, prefixText(p.prefix), ev.Revision, entriesText(n))
		default:
			code = o.printf("resnapshot at revision %d: %s; why: %s\n", ev.Revision, entriesText(n), ev.Cause)
		}
		for i := 0; i < n && code == exitOK; i++ {
			e := &ev.Entries[i]
			if o.json {
				j := entryOf(*e)
				code = o.printJSON(watchLine{Event: "entry", Entry: &j})
			} else {
				code = o.printf("  revision %d key %s owner %s size %d\n", e.Revision, e.Key, e.Owner, len(e.Document))
			}
		}
		return code
	case client.EventUpdate:
		if o.json {
			l := watchLine{Event: "update", Sequence: ev.Sequence, Kind: ev.Update.String(), Revision: ev.Revision, Key: ev.Key}
			if ev.Entry != nil {
				j := entryOf(*ev.Entry)
				l.Entry = &j
			}
			return o.printJSON(l)
		}
		return o.printf("update %d %s revision %d key %s\n", ev.Sequence, ev.Update, ev.Revision, ev.Key)
	}
	return o.cmd.Fail(exitUsage, "the client delivered an event of kind %v", ev.Kind)
}

func prefixText(prefix string) string {
	if prefix == "" {
		return ""
	}
	return " prefix " + prefix
}

func entriesText(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}
