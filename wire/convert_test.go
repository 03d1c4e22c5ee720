package wire

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// TestEveryValueRoundTrips checks the tables both ways: every store value
// maps to the wire value of the same spelling and back, every wire value
// but UNSPECIFIED is reached (so a value added to the .proto without a
// mapping fails here), and UNSPECIFIED or an unknown number never maps to
// a valid store value.
func TestEveryValueRoundTrips(t *testing.T) {
	t.Parallel()
	t.Run("kinds", func(t *testing.T) {
		t.Parallel()
		reached := map[pb.StateStoreWatchUpdateKind]bool{}
		for k := watch.Put; k <= watch.Expire; k++ {
			w := Kind(k)
			if want := "STATE_STORE_WATCH_UPDATE_KIND_" + k.String(); w.String() != want {
				t.Errorf("%v maps to %v, want %s", k, w, want)
			}
			if back, ok := StoreKind(w); !ok || back != k {
				t.Errorf("%v comes back as %v, %v", w, back, ok)
			}
			reached[w] = true
		}
		checkReached(t, pb.StateStoreWatchUpdateKind(0).Descriptor().Values().Len(), len(reached))
		if Kind(0) != 0 || Kind(watch.Expire+1) != 0 {
			t.Error("an invalid kind maps to a wire kind")
		}
		for _, w := range []pb.StateStoreWatchUpdateKind{0, pb.StateStoreWatchUpdateKind(len(reached) + 1), -1} {
			if k, ok := StoreKind(w); ok || k != 0 {
				t.Errorf("wire kind %d maps to %v, %v", w, k, ok)
			}
		}
	})
	t.Run("reasons", func(t *testing.T) {
		t.Parallel()
		reached := map[pb.StateStoreWatchCloseReason]bool{}
		// watch.Reasons lists every reason, so one added to the registry
		// without a wire spelling fails here.
		for _, r := range watch.Reasons {
			w := Reason(r)
			if want := "STATE_STORE_WATCH_CLOSE_REASON_" + r.String(); w.String() != want {
				t.Errorf("%v maps to %v, want %s", r, w, want)
			}
			if back, ok := StoreReason(w); !ok || back != r {
				t.Errorf("%v comes back as %v, %v", w, back, ok)
			}
			reached[w] = true
		}
		checkReached(t, pb.StateStoreWatchCloseReason(0).Descriptor().Values().Len(), len(reached))
		if Reason(0) != 0 || Reason(watch.Reason(len(watch.Reasons)+1)) != 0 {
			t.Error("an invalid reason maps to a wire reason")
		}
		for _, w := range []pb.StateStoreWatchCloseReason{0, pb.StateStoreWatchCloseReason(len(reached) + 1), -1} {
			if r, ok := StoreReason(w); ok || r != 0 {
				t.Errorf("wire reason %d maps to %v, %v", w, r, ok)
			}
		}
	})
	t.Run("entry", func(t *testing.T) {
		t.Parallel()
		e := materialize.Entry{Namespace: "service/a", Key: "intents/x", Schema: "keeppeek.media-intent.v1",
			Owner: "coordinator", Revision: 7, CreatedMs: 1, UpdatedMs: 2, ExpiresMs: 3, Document: []byte(`{"a":1}`)}
		back := StoreEntry(Entry(&e))
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("StoreEntry(Entry(e)) = %+v, want %+v", back, e)
		}
		// Every field of the store entry is set above, so a field added to
		// materialize.Entry without a mapping shows up as zero.
		v := reflect.ValueOf(back)
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Errorf("materialize.Entry.%s is not mapped from the wire", v.Type().Field(i).Name)
			}
		}
	})
}

// checkReached: every enum value but UNSPECIFIED was reached, each once
// (distinct store values map to distinct wire values).
func checkReached(t *testing.T, values, reached int) {
	t.Helper()
	if reached != values-1 {
		t.Errorf("%d wire values reached, the enum has %d besides UNSPECIFIED", reached, values-1)
	}
}

// TestWatchMessagesRoundTrip sends each watch message through its wire
// form and back: what a Go client rebuilds is what the server's registry
// delivered.
func TestWatchMessagesRoundTrip(t *testing.T) {
	t.Parallel()
	e1 := &materialize.Entry{Namespace: "user/alice", Key: "k/a", Schema: "s", Owner: "alice", Revision: 4, CreatedMs: 1, UpdatedMs: 2, Document: []byte(`{}`)}
	e2 := &materialize.Entry{Namespace: "user/alice", Key: "k/b", Schema: "s", Owner: "alice", Revision: 5, CreatedMs: 3, UpdatedMs: 3, ExpiresMs: 9, Document: []byte(`{"x":1}`)}
	snap := &watch.Snapshot{RequestID: 41, WatchID: "w", Namespace: "user/alice", KeyPrefix: "k/", SnapshotRevision: 5, Entries: []*materialize.Entry{e1, e2}}
	if got := StoreSnapshot(roundTrip(t, Snapshot(snap)), 41, "user/alice", "k/"); !reflect.DeepEqual(got, snap) {
		t.Errorf("snapshot came back as %+v, want %+v", got, snap)
	}
	updates := []*watch.Update{
		{WatchID: "w", Sequence: 1, Revision: 6, Kind: watch.Put, Namespace: "user/alice", Key: "k/b", Entry: e2},
		{WatchID: "w", Sequence: 2, Revision: 7, Kind: watch.Delete, Namespace: "user/alice", Key: "k/a"},
		{WatchID: "w", Sequence: 3, Revision: 9, Kind: watch.Expire, Namespace: "user/alice", Key: "k/b"},
	}
	for _, u := range updates {
		m := roundTrip(t, Update(u))
		if u.Kind == watch.Put && m.GetKey() != "" {
			t.Errorf("a PUT carries its key outside its entry: %v", m)
		}
		if got := StoreUpdate(m, "user/alice"); !reflect.DeepEqual(got, u) {
			t.Errorf("update came back as %+v, want %+v", got, u)
		}
	}
	for _, r := range watch.Reasons {
		c := &watch.Closed{WatchID: "w", Reason: r, Message: "because " + r.String()}
		if got := StoreClosed(roundTrip(t, Closed(c))); !reflect.DeepEqual(got, c) {
			t.Errorf("closure came back as %+v, want %+v", got, c)
		}
	}
	// A newer server's values stay recognisably unknown.
	u := StoreUpdate(&pb.StateStoreWatchUpdate{WatchId: "w", WatchSequence: 1, Kind: 99, Key: "k"}, "user/alice")
	if u.Kind != 0 || !strings.HasPrefix(u.Kind.String(), "Kind(") {
		t.Errorf("an unknown kind came back as %v", u.Kind)
	}
	if c := StoreClosed(&pb.StateStoreWatchClosed{WatchId: "w", Reason: 99}); c.Reason != 0 {
		t.Errorf("an unknown reason came back as %v", c.Reason)
	}
}

// roundTrip encodes and decodes m, as the connection does.
func roundTrip[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}
