package dispatch_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire/dispatch"
)

// TestSnapshotBoundIsExact fills a prefix so that the WatchState answer for
// watch id "w-a" encodes to exactly 65,536 bytes (the whole ServerMessage,
// as framed on the wire): it is accepted. The same snapshot for watch id
// "w-ab" is one byte longer: WATCH_TOO_BROAD, and nothing is registered.
func TestSnapshotBoundIsExact(t *testing.T) {
	t.Parallel()
	s := openStore(t, clock.NewFake(start))
	const ns, bound = "service/big", 65536
	ctx := context.Background()
	put := func(i, size int) {
		t.Helper()
		if _, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: fmt.Sprintf("intents/%d", i), Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(size, i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The answer the store would send, measured with the real encoder.
	answerSize := func(requestID uint64, watchID string) int {
		var entries []*statestore.Entry
		for i := 0; i < 4; i++ {
			e, err := s.Get(ctx, admin, ns, fmt.Sprintf("intents/%d", i))
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, &e)
		}
		return proto.Size(dispatch.SnapshotMessage(&watch.Snapshot{RequestID: requestID, WatchID: watchID,
			SnapshotRevision: s.Namespace(ns).Revision, Entries: entries}))
	}
	for i := 0; i < 3; i++ {
		put(i, 16384)
	}
	last := 15000
	put(3, last)
	for n := answerSize(41, "w-a"); n != bound; n = answerSize(41, "w-a") {
		last += bound - n
		put(3, last)
	}

	c := dial(t, dispatch.New(s, dispatch.Options{}), admin)
	m := c.call(watchReq(41, "w-a", ns, "intents/"))
	if snap := wantSnapshot(t, m, 41, "w-a"); len(snap.GetEntries()) != 4 {
		t.Fatalf("snapshot holds %d entries, want 4", len(snap.GetEntries()))
	}
	if n := proto.Size(m); n != bound {
		t.Fatalf("the accepted answer encodes to %d bytes, want exactly %d", n, bound)
	}
	if n := answerSize(42, "w-ab"); n != bound+1 {
		t.Fatalf("test setup: the longer watch id gives %d bytes, want %d", n, bound+1)
	}
	e := wantError(t, c.call(watchReq(42, "w-ab", ns, "intents/")), 42, codeTooBroad, "watch snapshot bytes")
	t.Logf("refusal: %s", e.GetMessage())
	wantError(t, c.call(unwatchReq(43, "w-ab")), 43, codeNotFound, "watch_id")
	// The accepted watch is live, the refused one never produces anything:
	// the next message is w-a's update.
	put(9, 200)
	wantUpdate(t, c.next(), "w-a", 1, kindPut)
}

// TestSnapshotEntryBound: 64 entries are accepted, 65 are WATCH_TOO_BROAD.
func TestSnapshotEntryBound(t *testing.T) {
	t.Parallel()
	s := openStore(t, clock.NewFake(start))
	c := dial(t, dispatch.New(s, dispatch.Options{}), admin)
	for i := 0; i < 64; i++ {
		wantEntry(t, c.call(putReq(uint64(i+1), "service/many", fmt.Sprintf("k/%02d", i), doc("x"), nil, 0)), uint64(i+1))
	}
	if snap := wantSnapshot(t, c.call(watchReq(100, "w", "service/many", "k/")), 100, "w"); len(snap.GetEntries()) != 64 {
		t.Fatalf("watch holds %d entries, want 64", len(snap.GetEntries()))
	}
	c.send(putReq(65, "service/many", "k/64", doc("x"), nil, 0))
	answer, update := c.answerAndUpdate()
	wantEntry(t, answer, 65)
	wantUpdate(t, update, "w", 1, kindPut)
	wantError(t, c.call(watchReq(101, "broad", "service/many", "k/")), 101, codeTooBroad, "watch snapshot entries")
}
