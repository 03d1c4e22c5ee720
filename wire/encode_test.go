package wire

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

func updateMessage(u *watch.Update) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_WatchUpdate{WatchUpdate: Update(u)}}
}

// checkEncoding asserts that AppendUpdate and UpdateSize of u, with and
// without a Memo, are proto.Marshal's bytes and length (AppendCheckedUpdate
// after UpdateSize too), that the bytes
// decode to the same message, and that AppendUpdate appends after what b
// holds.
func checkEncoding(t *testing.T, name string, u *watch.Update) {
	t.Helper()
	msg := updateMessage(u)
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		t.Fatalf("%s: proto.Marshal: %v", name, err)
	}
	for _, memo := range []*watch.Memo{nil, new(watch.Memo)} {
		v := *u
		v.Memo = memo
		got, err := AppendUpdate([]byte("prefix"), &v)
		if err != nil {
			t.Fatalf("%s (memo %v): AppendUpdate: %v", name, memo != nil, err)
		}
		if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("%s (memo %v): AppendUpdate\n got %x\nwant %x", name, memo != nil, got[min(len(got), len("prefix")):], want)
		}
		n, err := UpdateSize(&v)
		if err != nil || n != len(want) {
			t.Fatalf("%s (memo %v): UpdateSize = %d, %v; encoded %d", name, memo != nil, n, err, len(want))
		}
		// Sized, so checked: AppendCheckedUpdate writes the same bytes.
		if checked := AppendCheckedUpdate([]byte("prefix"), &v); !bytes.Equal(checked, got) {
			t.Fatalf("%s (memo %v): AppendCheckedUpdate\n got %x\nwant %x", name, memo != nil, checked, got)
		}
		back := new(pb.ServerMessage)
		if err := proto.Unmarshal(got[len("prefix"):], back); err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !proto.Equal(back, msg) {
			t.Fatalf("%s: decoded %v, want %v", name, back, msg)
		}
	}
}

// TestAppendUpdateIsProtoMarshal compares the spliced encoding with
// proto.Marshal of the same message over every kind, zero and extreme
// fields, leases (a negative expiry is a ten-byte varint), and documents
// across the varint length boundaries of each nesting level.
func TestAppendUpdateIsProtoMarshal(t *testing.T) {
	t.Parallel()
	long := string(bytes.Repeat([]byte("w"), 300))
	full := &materialize.Entry{Namespace: "service/transcoder-a", Key: "intents/k", Schema: "keeppeek.media-intent.v1",
		Owner: "coordinator", Revision: 41, CreatedMs: 1 << 42, UpdatedMs: 1<<42 + 1, ExpiresMs: 1 << 43,
		Document: bytes.Repeat([]byte("x"), 2193)}
	tests := []struct {
		name string
		u    watch.Update
	}{
		{"zero", watch.Update{}},
		{"put without entry", watch.Update{WatchID: "w", Sequence: 1, Revision: 2, Kind: watch.Put, Key: "k"}},
		{"put of an empty entry", watch.Update{WatchID: "w", Sequence: 1, Kind: watch.Put, Entry: &materialize.Entry{}}},
		{"put", watch.Update{WatchID: "transcode-intents", Sequence: 7, Revision: 41, Kind: watch.Put, Namespace: full.Namespace, Key: full.Key, Entry: full}},
		{"delete", watch.Update{WatchID: "w1", Sequence: 3, Revision: 9, Kind: watch.Delete, Namespace: "n", Key: "intents/gone"}},
		{"expire", watch.Update{WatchID: "w1", Sequence: 4, Revision: 10, Kind: watch.Expire, Namespace: "n", Key: "leases/l"}},
		{"delete carrying an entry", watch.Update{WatchID: "w", Sequence: 1, Kind: watch.Delete, Key: "k", Entry: full}},
		{"invalid kind", watch.Update{WatchID: "w", Sequence: 1, Kind: watch.Kind(9), Key: "k"}},
		{"extremes", watch.Update{WatchID: long, Sequence: math.MaxUint64, Revision: math.MaxUint64, Kind: watch.Put,
			Entry: &materialize.Entry{Namespace: long, Key: long, Schema: long, Owner: long, Revision: math.MaxUint64,
				CreatedMs: math.MinInt64, UpdatedMs: math.MaxInt64, ExpiresMs: -1}}},
		{"lease", watch.Update{WatchID: "w", Sequence: 1, Revision: 1, Kind: watch.Put,
			Entry: &materialize.Entry{Namespace: "n", Key: "leases/a", ExpiresMs: 1, Document: []byte("{}")}}},
	}
	for _, tc := range tests {
		checkEncoding(t, tc.name, &tc.u)
	}
	for _, docLen := range []int{0, 1, 100, 110, 127, 128, 16250, 16300, 16383, 16384, 20000, 2 << 20} {
		e := *full
		e.Document = bytes.Repeat([]byte("d"), docLen)
		checkEncoding(t, "document", &watch.Update{WatchID: "w", Sequence: 1, Revision: 5, Kind: watch.Put, Entry: &e})
	}
}

// randomUpdate draws an update whose fields each may be zero, small,
// extreme or negative, with documents across the length boundaries.
func randomUpdate(rng *rand.Rand) *watch.Update {
	str := func() string {
		return string(bytes.Repeat([]byte("abcdefgh"[rng.IntN(8):][:1]), []int{0, 1, 12, 127, 200}[rng.IntN(5)]))
	}
	u64 := func() uint64 {
		if rng.IntN(4) == 0 {
			return 0
		}
		return rng.Uint64() >> uint(rng.IntN(64)) // every varint length
	}
	i64 := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return -rng.Int64N(1 << 62)
		}
		return int64(u64() >> 1)
	}
	u := &watch.Update{WatchID: str(), Sequence: u64(), Revision: u64(), Kind: watch.Kind(rng.IntN(5)), Namespace: str(), Key: str()}
	if rng.IntN(4) != 0 {
		doc := make([]byte, []int{0, 1, 127, 128, 2193, 16384, rng.IntN(20000)}[rng.IntN(7)])
		for i := range doc {
			doc[i] = byte(rng.Uint32())
		}
		u.Entry = &materialize.Entry{Namespace: str(), Key: str(), Schema: str(), Owner: str(), Revision: u64(),
			CreatedMs: i64(), UpdatedMs: i64(), ExpiresMs: i64(), Document: doc}
	}
	return u
}

// TestAppendUpdateRandom is the property over random updates: the spliced
// bytes are proto.Marshal's and decode back to the same message.
func TestAppendUpdateRandom(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(30, 1))
	for range 5000 {
		checkEncoding(t, "random", randomUpdate(rng))
	}
}

// FuzzAppendUpdate drives the same property from the fuzzer's inputs.
func FuzzAppendUpdate(f *testing.F) {
	f.Add("w", uint64(1), uint64(2), uint8(1), "k", "n", "s", "o", uint64(3), int64(4), int64(5), int64(-1), []byte("{}"), true)
	f.Add("", uint64(0), uint64(0), uint8(2), "", "", "", "", uint64(0), int64(0), int64(0), int64(0), []byte(nil), false)
	f.Fuzz(func(t *testing.T, watchID string, seq, rev uint64, kind uint8, key, ns, schema, owner string,
		erev uint64, created, updated, expires int64, doc []byte, withEntry bool) {
		u := &watch.Update{WatchID: watchID, Sequence: seq, Revision: rev, Kind: watch.Kind(kind), Key: key}
		if withEntry {
			u.Entry = &materialize.Entry{Namespace: ns, Key: key, Schema: schema, Owner: owner, Revision: erev,
				CreatedMs: created, UpdatedMs: updated, ExpiresMs: expires, Document: doc}
		}
		if _, err := proto.Marshal(updateMessage(u)); err != nil {
			// Not UTF-8: the encoder must refuse it too.
			if _, err := AppendUpdate(nil, u); err == nil {
				t.Fatalf("proto.Marshal refuses %+v, AppendUpdate does not", u)
			}
			return
		}
		checkEncoding(t, "fuzz", u)
	})
}

// TestMemoEncodesOncePerEvent: the updates of one event share the bytes
// the first one encoded (the same backing array), and each still gets its
// own watch_id and watch_sequence.
func TestMemoEncodesOncePerEvent(t *testing.T) {
	t.Parallel()
	e := &materialize.Entry{Namespace: "n", Key: "k", Revision: 3, Document: bytes.Repeat([]byte("x"), 2193)}
	memo := new(watch.Memo)
	var tails [][]byte
	for i, id := range []string{"a", "bb", "a-longer-watch-id"} {
		u := &watch.Update{WatchID: id, Sequence: uint64(i + 1), Revision: 3, Kind: watch.Put, Key: "k", Entry: e, Memo: memo}
		got, err := AppendUpdate(nil, u)
		want, _ := proto.Marshal(updateMessage(u))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("update %d through the shared memo: %v\n got %x\nwant %x", i, err, got, want)
		}
		tail, err := memo.Encoded(u, func(*watch.Update) ([]byte, error) {
			t.Fatal("the memo encoded again")
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		tails = append(tails, tail)
	}
	for _, tail := range tails[1:] {
		if &tail[0] != &tails[0][0] {
			t.Fatal("updates of one event hold different encodings")
		}
	}
}

// TestAppendUpdateRefusesInvalidUTF8: a string proto.Marshal refuses is an
// *InvalidUTF8Error naming the field, from the memo path too, and b is
// left as it was.
func TestAppendUpdateRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	bad := "\xff"
	tests := []struct {
		field string
		u     watch.Update
	}{
		{"watch_update.watch_id", watch.Update{WatchID: bad, Kind: watch.Delete, Key: "k"}},
		{"watch_update.key", watch.Update{WatchID: "w", Kind: watch.Delete, Key: bad}},
		{"watch_update.entry.namespace", watch.Update{Kind: watch.Put, Entry: &materialize.Entry{Namespace: bad}}},
		{"watch_update.entry.key", watch.Update{Kind: watch.Put, Entry: &materialize.Entry{Key: bad}}},
		{"watch_update.entry.schema", watch.Update{Kind: watch.Put, Entry: &materialize.Entry{Schema: bad}}},
		{"watch_update.entry.owner", watch.Update{Kind: watch.Put, Entry: &materialize.Entry{Owner: bad}}},
	}
	for _, tc := range tests {
		if _, err := proto.Marshal(updateMessage(&tc.u)); err == nil {
			t.Fatalf("%s: proto.Marshal accepts it; the case tests nothing", tc.field)
		}
		for _, memo := range []*watch.Memo{nil, new(watch.Memo)} {
			u := tc.u
			u.Memo = memo
			b, err := AppendUpdate([]byte("kept"), &u)
			var ue *InvalidUTF8Error
			if !errors.As(err, &ue) || ue.Field != tc.field || string(b) != "kept" {
				t.Errorf("%s (memo %v): AppendUpdate = %q, %v", tc.field, memo != nil, b, err)
			}
			if _, err := UpdateSize(&u); !errors.As(err, &ue) {
				t.Errorf("%s (memo %v): UpdateSize error %v", tc.field, memo != nil, err)
			}
		}
	}
}

// TestEncodeFieldNumbers: the field numbers the encoder writes are the
// generated descriptors'.
func TestEncodeFieldNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		m     proto.Message
		field protoreflect.Name
		want  protowire.Number
	}{
		{&pb.ServerMessage{}, "watch_update", fieldServerWatchUpdate},
		{&pb.StateStoreWatchUpdate{}, "watch_id", fieldUpdateWatchID},
		{&pb.StateStoreWatchUpdate{}, "watch_sequence", fieldUpdateSequence},
		{&pb.StateStoreWatchUpdate{}, "revision", fieldUpdateRevision},
		{&pb.StateStoreWatchUpdate{}, "kind", fieldUpdateKind},
		{&pb.StateStoreWatchUpdate{}, "entry", fieldUpdateEntry},
		{&pb.StateStoreWatchUpdate{}, "key", fieldUpdateKey},
	}
	for _, tc := range tests {
		d := tc.m.ProtoReflect().Descriptor()
		if fd := d.Fields().ByName(tc.field); fd == nil || fd.Number() != tc.want {
			t.Errorf("%s.%s: descriptor %v, the encoder uses %d", d.Name(), tc.field, fd, tc.want)
		}
	}
	if n := (&pb.StateStoreWatchUpdate{}).ProtoReflect().Descriptor().Fields().Len(); n != 6 {
		t.Errorf("StateStoreWatchUpdate has %d fields, AppendUpdate writes 6", n)
	}
}
