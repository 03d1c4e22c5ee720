package wire

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/keeppeek/statestore/materialize"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/wire/wiresize"
)

func snapshotMessage(requestID uint64, watchID string, rev uint64, entries []*materialize.Entry) *pb.ServerMessage {
	snap := &pb.StateStoreWatchSnapshot{WatchId: watchID, SnapshotRevision: rev}
	for _, e := range entries {
		snap.Entries = append(snap.Entries, Entry(e))
	}
	return &pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: &pb.StateStoreResult{
		RequestId: requestID, Result: &pb.StateStoreResult_Watch{Watch: snap}}}}
}

func TestEntryCarriesEveryField(t *testing.T) {
	t.Parallel()
	e := &materialize.Entry{Namespace: "service/a", Key: "intents/x", Schema: "keeppeek.media-intent.v1",
		Owner: "coordinator", Revision: 7, CreatedMs: 1, UpdatedMs: 2, ExpiresMs: 3, Document: []byte(`{"a":1}`)}
	m := Entry(e)
	want := &pb.StateEntry{Namespace: "service/a", Key: "intents/x", Schema: "keeppeek.media-intent.v1",
		Owner: "coordinator", Revision: 7, CreatedAtMs: 1, UpdatedAtMs: 2, ExpiresAtMs: 3, Document: []byte(`{"a":1}`)}
	if !proto.Equal(m, want) {
		t.Fatalf("Entry = %v, want %v", m, want)
	}
	// Every field of the message is set above, so a field added to the
	// .proto without a mapping here shows up as unset.
	fields := m.ProtoReflect().Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		if !m.ProtoReflect().Has(fields.Get(i)) {
			t.Errorf("StateEntry.%s is not mapped from the store entry", fields.Get(i).Name())
		}
	}
	// A snapshot of many entries must not copy every document once more.
	if &m.Document[0] != &e.Document[0] {
		t.Error("Entry copied the document instead of sharing it")
	}
}

// TestSnapshotSizeIsExact compares Total with the marshalled message across
// the varint length boundaries of every nesting level (127/128 and
// 16383/16384 bytes) and with empty and extreme envelope fields.
func TestSnapshotSizeIsExact(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	type envelope struct {
		requestID uint64
		watchID   string
		rev       uint64
	}
	envelopes := []envelope{{0, "", 0}, {41, "transcode-intents", 120}, {math.MaxUint64, string(bytes.Repeat([]byte("w"), 200)), math.MaxUint64}}
	for _, docLen := range []int{0, 1, 60, 100, 110, 127, 128, 1000, 16250, 16384, 20000} {
		for n := 0; n <= 5; n++ {
			for _, env := range envelopes {
				var entries []*materialize.Entry
				var z SnapshotSize
				for i := 0; i < n; i++ {
					e := &materialize.Entry{Namespace: "service/transcoder-a", Key: "intents/k", Schema: "keeppeek.media-intent.v1",
						Owner: "o", Revision: rng.Uint64N(1 << uint(rng.IntN(64))), CreatedMs: rng.Int64N(1 << 42),
						UpdatedMs: rng.Int64(), Document: bytes.Repeat([]byte("x"), docLen+i)}
					if i%2 == 1 {
						e.ExpiresMs = -1 // negative int64 is a ten-byte varint
					}
					entries = append(entries, e)
					z.Add(e)
				}
				b, err := proto.Marshal(snapshotMessage(env.requestID, env.watchID, env.rev, entries))
				if err != nil {
					t.Fatal(err)
				}
				if got := z.Total(env.requestID, env.watchID, env.rev); got != len(b) {
					t.Fatalf("doc %d, %d entries, envelope %+v: Total = %d, encoded %d", docLen, n, env, got, len(b))
				}
				if z.Entries() > len(b) {
					t.Fatalf("Entries %d exceeds the encoded size %d", z.Entries(), len(b))
				}
			}
		}
	}
}

// TestWireSizeFieldNumbers: the field numbers wiresize computes with are
// the generated descriptors', so a renumbering in the .proto cannot leave
// the size arithmetic behind.
func TestWireSizeFieldNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		m     proto.Message
		field protoreflect.Name
		want  protowire.Number
	}{
		{&pb.ServerMessage{}, "result", wiresize.FieldServerResult},
		{&pb.StateStoreResult{}, "request_id", wiresize.FieldResultRequestID},
		{&pb.StateStoreResult{}, "watch", wiresize.FieldResultWatch},
		{&pb.StateStoreWatchSnapshot{}, "watch_id", wiresize.FieldSnapshotWatchID},
		{&pb.StateStoreWatchSnapshot{}, "snapshot_revision", wiresize.FieldSnapshotRevision},
		{&pb.StateStoreWatchSnapshot{}, "entries", wiresize.FieldSnapshotEntries},
		{&pb.StateEntry{}, "namespace", wiresize.FieldEntryNamespace},
		{&pb.StateEntry{}, "key", wiresize.FieldEntryKey},
		{&pb.StateEntry{}, "schema", wiresize.FieldEntrySchema},
		{&pb.StateEntry{}, "owner", wiresize.FieldEntryOwner},
		{&pb.StateEntry{}, "revision", wiresize.FieldEntryRevision},
		{&pb.StateEntry{}, "created_at_ms", wiresize.FieldEntryCreatedAtMs},
		{&pb.StateEntry{}, "updated_at_ms", wiresize.FieldEntryUpdatedAtMs},
		{&pb.StateEntry{}, "expires_at_ms", wiresize.FieldEntryExpiresAtMs},
		{&pb.StateEntry{}, "document", wiresize.FieldEntryDocument},
	}
	entryFields := 0
	for _, tc := range tests {
		d := tc.m.ProtoReflect().Descriptor()
		fd := d.Fields().ByName(tc.field)
		if fd == nil || fd.Number() != tc.want {
			t.Errorf("%s.%s: descriptor %v, wiresize uses %d", d.Name(), tc.field, fd, tc.want)
		}
		if d.Name() == "StateEntry" {
			entryFields++
		}
	}
	// EntrySize counts every field of StateEntry: one added to the .proto
	// must be added to it.
	if n := (&pb.StateEntry{}).ProtoReflect().Descriptor().Fields().Len(); n != entryFields {
		t.Errorf("StateEntry has %d fields, wiresize.EntrySize counts %d", n, entryFields)
	}
}

// TestEntrySizeIsProtoSize compares wiresize.EntrySize with proto.Size of
// the entry's message over zero, small, negative and extreme fields and
// documents across the varint length boundaries.
func TestEntrySizeIsProtoSize(t *testing.T) {
	t.Parallel()
	long := string(bytes.Repeat([]byte("n"), 300))
	tests := []materialize.Entry{
		{},
		{Namespace: "a"},
		{Key: long, Schema: "keeppeek.media-intent.v1", Owner: "o"},
		{Revision: 1, CreatedMs: 1, UpdatedMs: 1, ExpiresMs: 1},
		{Revision: 127, CreatedMs: 128, UpdatedMs: 16383, ExpiresMs: 16384},
		{Revision: math.MaxUint64, CreatedMs: math.MinInt64, UpdatedMs: math.MaxInt64, ExpiresMs: -1},
		{Document: []byte{}},
		{Document: bytes.Repeat([]byte("x"), 127)},
		{Document: bytes.Repeat([]byte("x"), 128)},
		{Document: bytes.Repeat([]byte("x"), 16384)},
		{Namespace: "service/transcoder-a", Key: "intents/k", Schema: "keeppeek.media-intent.v1", Owner: "coordinator",
			Revision: 41, CreatedMs: 1 << 42, UpdatedMs: 1<<42 + 1, ExpiresMs: 1 << 43, Document: bytes.Repeat([]byte("x"), 2193)},
	}
	for i, e := range tests {
		if got, want := wiresize.EntrySize(&e), proto.Size(Entry(&e)); got != want {
			t.Errorf("case %d (%+v): EntrySize %d, proto.Size %d", i, e, got, want)
		}
	}
}
