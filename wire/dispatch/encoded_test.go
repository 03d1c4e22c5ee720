package dispatch

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// TestEncodedUpdatesAreTheMessages: on a Conn that sends encoded
// messages, a watch update is queued as it is, holds exactly the bytes of
// its message in the budget and the outbox (as on a Conn without that
// path), and is sent as proto.Marshal's bytes of UpdateMessage; an update
// that does not encode (not UTF-8) goes the message's way, whose send
// reports it.
func TestEncodedUpdatesAreTheMessages(t *testing.T) {
	t.Parallel()
	doc := bytes.Repeat([]byte("x"), 2193)
	e := &materialize.Entry{Namespace: "service/a", Key: "intents/k", Schema: "keeppeek.media-intent.v1", Owner: "coordinator",
		Revision: 9, CreatedMs: 1, UpdatedMs: 2, ExpiresMs: 3, Document: doc}
	memo := new(watch.Memo)
	updates := []*watch.Update{
		{WatchID: "w1", Sequence: 1, Revision: 9, Kind: watch.Put, Namespace: e.Namespace, Key: e.Key, Entry: e, Memo: memo},
		{WatchID: "w2-longer", Sequence: 300, Revision: 9, Kind: watch.Put, Namespace: e.Namespace, Key: e.Key, Entry: e, Memo: memo},
		{WatchID: "w1", Sequence: 2, Revision: 10, Kind: watch.Delete, Namespace: e.Namespace, Key: e.Key, Memo: new(watch.Memo)},
		{WatchID: "w1", Sequence: 3, Revision: 11, Kind: watch.Expire, Namespace: e.Namespace, Key: "leases/l"},
	}
	var sentEncoded [][]byte
	var sentMessages []*pb.ServerMessage
	o := newOutbox(100, 0, newByteBudget(1<<20), func(m *pb.ServerMessage) error {
		sentMessages = append(sentMessages, m)
		return nil
	}, func() {})
	o.sendEncoded = func(m framing.Encoded) error {
		b, err := m.AppendTo(nil)
		if err == nil && len(b) != m.Size() {
			t.Errorf("Size %d, appended %d", m.Size(), len(b))
		}
		sentEncoded = append(sentEncoded, b)
		return err
	}
	plain := newOutbox(100, 0, newByteBudget(1<<20), func(*pb.ServerMessage) error { return nil }, func() {})
	var want int64
	for i, u := range updates {
		if err := o.offerUpdate(u); err != nil {
			t.Fatal(err)
		}
		if err := plain.offerUpdate(u); err != nil {
			t.Fatal(err)
		}
		want += int64(proto.Size(UpdateMessage(u)))
		if o.bytes != want || plain.bytes != want {
			t.Fatalf("after update %d the outboxes hold %d and %d bytes, want %d", i+1, o.bytes, plain.bytes, want)
		}
		if q := o.q[len(o.q)-1]; q.u != u || q.m != nil {
			t.Fatalf("update %d queued as %+v, not in its wire form", i+1, q)
		}
		if q := plain.q[len(plain.q)-1]; q.u != nil || q.m == nil {
			t.Fatalf("update %d queued on a plain Conn as %+v, not as its message", i+1, q)
		}
	}
	bad := &watch.Update{WatchID: "w1", Sequence: 4, Revision: 12, Kind: watch.Delete, Key: "\xff", Memo: new(watch.Memo)}
	if err := o.offerUpdate(bad); err != nil {
		t.Fatal(err)
	}
	if q := o.q[len(o.q)-1]; q.m == nil {
		t.Fatal("an update that does not encode was queued in its wire form")
	}
	o.close(false)
	if err := o.run(); err != nil {
		t.Fatal(err)
	}
	if len(sentEncoded) != len(updates) || len(sentMessages) != 1 {
		t.Fatalf("%d sent encoded, %d as messages; want %d and 1", len(sentEncoded), len(sentMessages), len(updates))
	}
	for i, u := range updates {
		m, err := proto.Marshal(UpdateMessage(u))
		if err != nil || !bytes.Equal(sentEncoded[i], m) {
			t.Fatalf("update %d sent as %x, proto.Marshal %x (%v)", i+1, sentEncoded[i], m, err)
		}
	}
	if _, err := proto.Marshal(sentMessages[0]); err == nil {
		t.Fatal("the message of an update with a key not UTF-8 marshals; the case tests nothing")
	}
	if o.bytes != 0 {
		t.Fatalf("after sending, the outbox holds %d bytes", o.bytes)
	}
	if !errors.Is(o.offerUpdate(updates[0]), errOutboxClosed) {
		t.Fatal("a closed outbox took an update")
	}
}
