// Package demo is what `kpjournal demo` plays: the state store's main
// behaviours on real stores (compare-and-set writers, a lease handover, a
// watcher, the specification's sequence diagram over the wire protocol,
// transcoder workers with a standby takeover, a restart and a backup
// restored elsewhere), each step printed as it happens. It lives here, not
// in the command, because it pulls in the worker kit and the wire
// protocol, which the journal tools have no use for.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
)

const demoNS, demoKey = "service/transcoder-a", "intents/front-door-video"

func intent(source string, priority int) []byte {
	return fmt.Appendf(nil, `{"role":"publish","desired":true,"source_id":%q,"media_kind":"video","variant_id":"browser-h264-720p","priority":%d,"recording_mode":"disabled"}`, source, priority)
}

// Run plays the demo in dir (which must not hold a store yet), printing
// each step to out; hooks let a caller follow the stores it opens.
func Run(dir string, out io.Writer, hooks Hooks) error {
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
	if err := Worker(dir, out); err != nil {
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
