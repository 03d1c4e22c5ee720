package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"reflect"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// chanSink hands the demo coordinator's control-channel messages to the
// demo's own goroutine, which prints them: the sink runs on the session's
// delivery goroutine and must not share the output writer.
type chanSink chan watch.Message

func (c chanSink) Deliver(m watch.Message) error {
	c <- m
	return nil
}

func printMessage(out io.Writer, m watch.Message) {
	switch m := m.(type) {
	case *watch.Snapshot:
		fmt.Fprintf(out, "  watch %s: snapshot at revision %d, %d entries\n", m.WatchID, m.SnapshotRevision, len(m.Entries))
	case *watch.Update:
		fmt.Fprintf(out, "  watch %s: sequence %d  revision %d  %-6s %s\n", m.WatchID, m.Sequence, m.Revision, m.Kind, m.Key)
	case *watch.Closed:
		fmt.Fprintf(out, "  watch %s: closed (%s)\n", m.WatchID, m.Reason)
	}
}

// nopSink discards messages, for a session used only for its snapshot.
type nopSink struct{}

func (nopSink) Deliver(watch.Message) error { return nil }

// demoWatch: a coordinator watches the intents/ and leases/ prefixes while
// intents are written and a lease lapses; each update prints with its
// sequence and revision, and the coordinator acknowledges as it applies.
func demoWatch(s *statestore.Store, out io.Writer) error {
	ctx := context.Background()
	coord := statestore.Principal{ID: "coordinator-a", Admin: true}
	sink := make(chanSink, 64)
	sess, err := s.OpenSession(coord, sink)
	if err != nil {
		return err
	}
	defer sess.Close()
	fmt.Fprintf(out, "\ncoordinator-a watches %s prefixes intents/ and leases/\n", demoNS)
	for _, w := range []struct{ id, prefix string }{{"transcode-intents", "intents/"}, {"leases", "leases/"}} {
		if _, err := s.Watch(ctx, sess, statestore.WatchRequest{WatchID: w.id, Namespace: demoNS, KeyPrefix: w.prefix}); err != nil {
			return err
		}
		printMessage(out, <-sink)
	}
	await := func() (*watch.Update, error) {
		select {
		case m := <-sink:
			printMessage(out, m)
			if u, ok := m.(*watch.Update); ok {
				return u, s.Ack(sess, u.WatchID, u.Sequence)
			}
			return nil, fmt.Errorf("unexpected message %T", m)
		case <-time.After(5 * time.Second):
			return nil, fmt.Errorf("no update arrived")
		}
	}
	for i, key := range []string{"intents/back-yard-video", "intents/front-door-audio"} {
		if _, err := s.Put(ctx, coord, statestore.PutRequest{Namespace: demoNS, Key: key, Schema: schema.MediaIntentV1, Document: intent("cam-"+fmt.Sprint(i), 20)}); err != nil {
			return err
		}
		if _, err := await(); err != nil {
			return err
		}
	}
	worker := statestore.Principal{ID: "transcoder-worker-3", Admin: true}
	e, err := s.Put(ctx, worker, statestore.PutRequest{Namespace: demoNS, Key: "leases/back-yard-video", Schema: schema.MediaIntentV1,
		Document: intent("cam-0", 20), Expect: statestore.CreateOnly, TTL: time.Second})
	if err != nil {
		return err
	}
	if _, err := await(); err != nil {
		return err
	}
	fmt.Fprintf(out, "  (%s holds the lease until %s and stops renewing)\n", worker.ID, time.UnixMilli(e.ExpiresMs).Format(time.RFC3339Nano))
	// The EXPIRE is committed by the store's expiry timer; the earlier
	// lapsed lease may expire first and is shown too.
	for {
		u, err := await()
		if err != nil {
			return err
		}
		if u.Kind == watch.Expire && u.Key == "leases/back-yard-video" {
			return nil
		}
	}
}

// demoBackup takes an online backup, restores it into a second directory
// and shows that both stores hold the same state.
func demoBackup(dir string, s *statestore.Store, out io.Writer) error {
	var buf bytes.Buffer
	if err := s.Backup(&buf); err != nil {
		return err
	}
	second, err := os.MkdirTemp("", "kpjournal-demo-restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(second)
	size := buf.Len()
	if err := statestore.RestoreDir(second, &buf, s.Limits()); err != nil {
		return err
	}
	r, err := statestore.Open(statestore.Options{Dir: second})
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Fprintf(out, "\nbackup of %s (%d bytes) restored into %s\n", dir, size, second)
	a, b := s.Namespace(demoNS), r.Namespace(demoNS)
	fmt.Fprintf(out, "  original: namespace revision %d, %d entries, %d bytes\n", a.Revision, a.Entries, a.Bytes)
	fmt.Fprintf(out, "  restored: namespace revision %d, %d entries, %d bytes\n", b.Revision, b.Entries, b.Bytes)
	if a != b {
		return fmt.Errorf("restored namespace differs from the original")
	}
	for _, key := range []string{demoKey, "observed/front-door-video", demoLeaseKey, "intents/back-yard-video", "intents/front-door-audio"} {
		x, err1 := s.Get(context.Background(), statestore.System(), demoNS, key)
		y, err2 := r.Get(context.Background(), statestore.System(), demoNS, key)
		if statestore.CodeOf(err1) != statestore.CodeOf(err2) || !reflect.DeepEqual(x, y) {
			return fmt.Errorf("entry %s differs after restore", key)
		}
	}
	fmt.Fprintln(out, "  every entry, revision and owner matches")
	return nil
}
