package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
)

// snapSink keeps the last snapshot delivered.
type snapSink struct{ last chan *watch.Snapshot }

func (s snapSink) Deliver(m watch.Message) error {
	if sn, ok := m.(*watch.Snapshot); ok {
		select {
		case s.last <- sn:
		default:
		}
	}
	return nil
}

// BenchmarkSnapshotAnswer asks whether the snapshots many watchers take of
// the same state should share their entries' encoding, as updates do. For
// snapshots of 1, 8 and 28 entries of 2,193-byte documents (28 is about
// the 65,536-byte bound) it times, per watcher: "watch", the store's
// WatchState (capture under the commit-order lock, bounds, registration,
// the copy of every entry its WatchResult returns) and the UnwatchState
// that lets the next one in; "encode", what the dispatcher adds for the
// answer now (SnapshotMessage, its size and its marshalling, as the
// framing does); "splice", the floor sharing could reach: the envelope
// and the entries' shared bytes copied into the frame.
func BenchmarkSnapshotAnswer(b *testing.B) {
	for _, n := range []int{1, 8, 28} {
		b.Run(fmt.Sprintf("entries%d", n), func(b *testing.B) { benchSnapshotAnswer(b, n) })
	}
}

func benchSnapshotAnswer(b *testing.B, entries int) {
	s, err := statestore.Open(statestore.Options{Dir: b.TempDir(), NoSync: true, Clock: clock.NewFake(time.Unix(1_750_000_000, 0))})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const ns = "service/snap"
	for i := range entries {
		if _, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: fmt.Sprintf("intents/k%02d", i), Schema: schema.MediaIntentV1,
			Document: testdoc.MediaIntent(2193, i)}); err != nil {
			b.Fatal(err)
		}
	}
	sink := snapSink{last: make(chan *watch.Snapshot, 1)}
	sess, err := s.OpenSession(admin, sink)
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	req := statestore.WatchRequest{RequestID: 7, WatchID: "transcode-intents", Namespace: ns, KeyPrefix: "intents/"}
	if _, err := s.Watch(ctx, sess, req); err != nil {
		b.Fatal(err)
	}
	snap := <-sink.last
	if len(snap.Entries) != entries {
		b.Fatalf("snapshot of %d entries, want %d", len(snap.Entries), entries)
	}
	if err := s.Unwatch(sess, req.WatchID); err != nil {
		b.Fatal(err)
	}
	buf, err := framing.AppendFrame(nil, dispatch.SnapshotMessage(snap))
	if err != nil {
		b.Fatal(err)
	}
	// The envelope (frame prefix, tags, request_id, watch_id, revision) is
	// under 40 bytes: the rest stands for the entries' shared bytes, so a
	// splice writes a frame of the same length.
	head := append([]byte(nil), buf[:40]...)
	shared := append([]byte(nil), buf[40:]...)
	b.Run("watch", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Watch(ctx, sess, req); err != nil {
				b.Fatal(err)
			}
			if err := s.Unwatch(sess, req.WatchID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if buf, err = framing.AppendFrame(buf[:0], dispatch.SnapshotMessage(snap)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("splice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = append(append(buf[:0], head...), shared...)
		}
	})
}
