package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
)

const demoNS, demoKey = "service/transcoder-a", "intents/front-door-video"

const demoAbout = `Runs the state store's main behaviours on a real store and prints each step. Two
coordinators compare-and-set one intent key from the same revision: one wins, the other gets CONFLICT
with the current revision, rereads and retries. A transcoder worker claims a lease create-only with a
1 s TTL; a standby's claim conflicts, so it stays standby; the holder stops renewing, the lease lapses
(an EXPIRE is journaled and the namespace revision advances) and the standby's claim succeeds. A
coordinator watches two key prefixes and receives its snapshot, then each update with its
watch_sequence, revision and kind (PUT, EXPIRE), acknowledging each as it applies it. The store is
then closed, reopened and its journal replayed, and its entries are listed with revisions and owners.
Last, a backup taken while the store serves is restored into a second directory and compared entry
by entry. It takes a few seconds, most of them waiting for leases to lapse. Without --dir the store
lives in a temporary directory removed afterwards; with --dir it stays there for the other commands
to inspect, so DIR must not already hold a store. With --metrics-listen the store's Prometheus
metrics are served at http://ADDR/metrics throughout, and at the end the demo keeps its last store
open, a worker renewing its lease every second, until interrupted.`

func runDemo(args []string, stdout, stderr io.Writer) int {
	c := newCLI("demo", "[--dir DIR] [--metrics-listen ADDR]", demoAbout, []string{
		"kpjournal demo",
		"kpjournal demo --dir /tmp/kp-demo && kpjournal dump --dir /tmp/kp-demo",
		"kpjournal demo --metrics-listen :9464",
	}, stdout, stderr)
	c.fs.StringVar(&c.dir, "dir", "", "directory to build the demo's store in, holding no store yet (default: a new temporary directory, removed afterwards)")
	listen := c.fs.String("metrics-listen", "", "serve Prometheus metrics at http://`ADDR`/metrics during the demo and, after it, until interrupted; a bare :PORT listens on 127.0.0.1 only")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if code := c.checkDir(false); code >= 0 {
		return code
	}
	if _, err := os.Stat(c.root()); c.dir != "" && err == nil {
		return c.fail(exitUsage, "%s already holds a store; the demo builds a new one, so it would fail part way. "+
			"Give --dir a new directory, or leave --dir out to use a temporary one.", c.root())
	}
	d := c.dir
	if d == "" {
		tmp, err := os.MkdirTemp("", "kpjournal-demo-")
		if err != nil {
			return c.fail(exitUsage, "%v", err)
		}
		defer os.RemoveAll(tmp)
		d = tmp
	}
	var hooks demoHooks
	if *listen != "" {
		m, err := startMetrics(*listen)
		if err != nil {
			return c.fail(exitUsage, "%v", err)
		}
		defer m.stop()
		fmt.Fprintf(stdout, "metrics: %s\n", m.URL())
		ctx, stop := stopContext()
		defer stop()
		hooks = demoHooks{opened: m.opened, done: func(s *statestore.Store) error { return m.linger(ctx, s, stdout) }}
	}
	if err := demo(d, stdout, hooks); err != nil {
		return c.fail(exitUsage, "%v", err)
	}
	return exitOK
}

func intent(source string, priority int) []byte {
	return fmt.Appendf(nil, `{"role":"publish","desired":true,"source_id":%q,"media_kind":"video","variant_id":"browser-h264-720p","priority":%d,"recording_mode":"disabled"}`, source, priority)
}

func demo(dir string, out io.Writer, hooks demoHooks) error {
	ctx := context.Background()
	s, err := statestore.Open(statestore.Options{Dir: dir})
	hooks.onOpen(s, err)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "store opened in %s/%s\n\n", dir, statestore.StoreDirName)
	a := statestore.Principal{ID: "coordinator-a", Admin: true}
	b := statestore.Principal{ID: "coordinator-b", Admin: true}
	put := func(p statestore.Principal, doc []byte, x statestore.Expect) (statestore.Entry, error) {
		return s.Put(ctx, p, statestore.PutRequest{Namespace: demoNS, Key: demoKey, Schema: schema.MediaIntentV1, Document: doc, Expect: x})
	}
	base, err := put(a, intent("front-door", 10), statestore.CreateOnly)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "coordinator-a creates %s/%s -> revision %d\n", demoNS, demoKey, base.Revision)
	ea, errA := put(a, intent("front-door", 50), statestore.IfRevision(base.Revision))
	_, errB := put(b, intent("front-door", 90), statestore.IfRevision(base.Revision))
	if errA != nil {
		return errA
	}
	fmt.Fprintf(out, "coordinator-a compare-and-set from revision %d -> revision %d\n", base.Revision, ea.Revision)
	var se *statestore.Error
	if !errors.As(errB, &se) || se.Code != statestore.Conflict {
		return fmt.Errorf("expected CONFLICT for the second writer, got %v", errB)
	}
	fmt.Fprintf(out, "coordinator-b compare-and-set from revision %d -> %s (current revision %d)\n", base.Revision, se.Code, se.CurrentRevision)
	cur, err := s.Get(ctx, b, demoNS, demoKey)
	if err != nil {
		return err
	}
	eb, err := put(b, intent("front-door", 90), statestore.IfRevision(cur.Revision))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "coordinator-b rereads revision %d and retries  -> revision %d\n", cur.Revision, eb.Revision)
	if _, err := s.Put(ctx, b, statestore.PutRequest{Namespace: demoNS, Key: "observed/front-door-video", Schema: schema.MediaIntentV1, Document: intent("front-door", 1)}); err != nil {
		return err
	}
	if err := demoLease(s, out); err != nil {
		return err
	}
	if err := demoWatch(s, out); err != nil {
		return err
	}
	if err := demoWire(dir, out); err != nil {
		return err
	}
	if err := demoWorker(dir, out); err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nstore closed; reopening and replaying the journal")
	s, err = statestore.Open(statestore.Options{Dir: dir})
	hooks.onOpen(s, err)
	if err != nil {
		return err
	}
	defer s.Close()
	rep := s.OpenReport()
	ns := s.Namespace(demoNS)
	fmt.Fprintf(out, "replayed %d records; namespace %s at revision %d, %d entries, %d bytes\n\n", rep.Replayed, demoNS, ns.Revision, ns.Entries, ns.Bytes)
	// A watch snapshot is the store's listing: every entry of the namespace
	// at one revision.
	sess, err := s.OpenSession(statestore.System(), nopSink{})
	if err != nil {
		return err
	}
	defer sess.Close()
	list, err := s.Watch(context.Background(), sess, statestore.WatchRequest{WatchID: "list", Namespace: demoNS})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tKEY\tREVISION\tOWNER\tSCHEMA\tBYTES")
	for _, e := range list.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\n", e.Namespace, e.Key, e.Revision, e.Owner, e.Schema, len(e.Document))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := demoBackup(dir, s, out); err != nil {
		return err
	}
	return hooks.onDone(s)
}

const demoLeaseKey = "leases/front-door-video-browser-h264-720p"

// demoLease is the specification's service-coordination pattern: a worker
// claims a lease create-only with a short TTL, a standby fails to claim it,
// the holder stops renewing, the lease lapses (an EXPIRE is journaled) and
// the standby's claim succeeds.
func demoLease(s *statestore.Store, out io.Writer) error {
	ctx := context.Background()
	w1 := statestore.Principal{ID: "transcoder-worker-1", Admin: true}
	w2 := statestore.Principal{ID: "transcoder-worker-2", Admin: true}
	claim := func(p statestore.Principal) (statestore.Entry, error) {
		return s.Put(ctx, p, statestore.PutRequest{Namespace: demoNS, Key: demoLeaseKey, Schema: schema.MediaIntentV1,
			Document: intent("front-door", 100), Expect: statestore.CreateOnly, TTL: time.Second})
	}
	fmt.Fprintf(out, "\nlease %s/%s (TTL 1 s)\n", demoNS, demoLeaseKey)
	held, err := claim(w1)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s claims it create-only          -> revision %d, expires_at_ms %d\n", w1.ID, held.Revision, held.ExpiresMs)
	_, err = claim(w2)
	var se *statestore.Error
	if !errors.As(err, &se) || se.Code != statestore.Conflict {
		return fmt.Errorf("expected the standby's claim to conflict, got %v", err)
	}
	fmt.Fprintf(out, "%s tries to claim it              -> %s (current revision %d): stays standby\n", w2.ID, se.Code, se.CurrentRevision)
	before := s.Namespace(demoNS).Revision
	fmt.Fprintf(out, "%s stops renewing; waiting for the lease to lapse\n", w1.ID)
	time.Sleep(time.Until(time.UnixMilli(held.ExpiresMs)) + 50*time.Millisecond)
	if _, err := s.Get(ctx, w2, demoNS, demoLeaseKey); !errors.Is(err, statestore.ErrNotFound) {
		return fmt.Errorf("lapsed lease still readable: %v", err)
	}
	fmt.Fprintf(out, "lease lapsed: EXPIRE journaled, namespace revision %d -> %d\n", before, s.Namespace(demoNS).Revision)
	won, err := claim(w2)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s claims it create-only          -> revision %d: now the active worker\n", w2.ID, won.Revision)
	return nil
}
