package wstransport

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// TestPutInPlaceFieldNumbers: the field numbers decodePutInPlace reads
// are the generated descriptors', and PutState has no field it skips.
func TestPutInPlaceFieldNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		m     proto.Message
		field protoreflect.Name
		want  protowire.Number
	}{
		{&pb.ClientMessage{}, "put_state", fieldClientPutState},
		{&pb.PutState{}, "request_id", fieldPutRequestID},
		{&pb.PutState{}, "namespace", fieldPutNamespace},
		{&pb.PutState{}, "key", fieldPutKey},
		{&pb.PutState{}, "schema", fieldPutSchema},
		{&pb.PutState{}, "document", fieldPutDocument},
		{&pb.PutState{}, "expected_revision", fieldPutExpected},
		{&pb.PutState{}, "ttl_ms", fieldPutTTL},
	}
	for _, tc := range tests {
		d := tc.m.ProtoReflect().Descriptor()
		if fd := d.Fields().ByName(tc.field); fd == nil || fd.Number() != tc.want {
			t.Errorf("%s.%s: descriptor %v, the decoder uses %d", d.Name(), tc.field, fd, tc.want)
		}
	}
	if n := (&pb.PutState{}).ProtoReflect().Descriptor().Fields().Len(); n != int(lastPutField) {
		t.Errorf("PutState has %d fields, decodePutInPlace reads %d", n, lastPutField)
	}
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func putMessage(p *pb.PutState) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: p}}
}

// putInPlaceSeeds are encodings the decoder takes (canonical PutStates)
// and ones it must leave to proto.Unmarshal.
func putInPlaceSeeds(t testing.TB) [][]byte {
	rev := uint64(0)
	full := &pb.PutState{RequestId: 7, Namespace: "user/alice", Key: "k", Schema: "s", Document: []byte(`{"a":1}`), ExpectedRevision: &rev, TtlMs: 5000}
	canonical := marshal(t, putMessage(full))
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	inner := marshal(t, full)
	wrap := func(body []byte) []byte {
		return protowire.AppendBytes(tag(fieldClientPutState, protowire.BytesType), body)
	}
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	return [][]byte{
		canonical,
		marshal(t, putMessage(&pb.PutState{})),
		marshal(t, putMessage(&pb.PutState{RequestId: 1, Key: "k"})),
		marshal(t, &pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: 1, Key: "k"}}}),
		nil,
		// Repeated: put_state twice merges; a field twice, last wins.
		cat(canonical, canonical),
		wrap(cat(inner, protowire.AppendVarint(tag(fieldPutRequestID, protowire.VarintType), 9))),
		// An unknown field, a wrong wire type, a truncated body.
		wrap(cat(inner, protowire.AppendVarint(tag(20, protowire.VarintType), 1))),
		wrap(protowire.AppendVarint(tag(fieldPutNamespace, protowire.VarintType), 1)),
		canonical[:len(canonical)-1],
		// Strings that are not UTF-8, and a document that is not.
		wrap(protowire.AppendBytes(tag(fieldPutKey, protowire.BytesType), []byte{0xff})),
		wrap(protowire.AppendBytes(tag(fieldPutDocument, protowire.BytesType), []byte{0xff, 0xfe})),
		// An empty document, an overlong varint.
		wrap(protowire.AppendBytes(tag(fieldPutDocument, protowire.BytesType), nil)),
		wrap(cat(tag(fieldPutRequestID, protowire.VarintType), []byte{0x81, 0x80, 0x80, 0x00})),
	}
}

// checkPutInPlace decodes b both ways: what decodePutInPlace takes,
// proto.Unmarshal decodes to an equal message, and the document refers to
// b.
func checkPutInPlace(t *testing.T, b []byte) bool {
	t.Helper()
	var ip inPlace
	if !decodePutInPlace(b, &ip) {
		return false
	}
	var want pb.ClientMessage
	if err := proto.Unmarshal(b, &want); err != nil {
		t.Fatalf("decoded in place %x, which proto.Unmarshal refuses: %v", b, err)
	}
	if !proto.Equal(&ip.msg, &want) {
		t.Fatalf("%x decoded in place as %v, proto.Unmarshal has %v", b, &ip.msg, &want)
	}
	if (ip.put.Document == nil) != (want.GetPutState().GetDocument() == nil) || (ip.put.ExpectedRevision == nil) != (want.GetPutState().ExpectedRevision == nil) {
		t.Fatalf("%x: presence differs from proto.Unmarshal's", b)
	}
	if d := ip.put.Document; len(d) > 0 {
		if cap(d) != len(d) {
			t.Fatalf("the document's capacity reaches past it into the buffer")
		}
		d[0] ^= 0xff // it is b's byte
		changed := proto.Equal(&ip.msg, &want)
		d[0] ^= 0xff
		if changed {
			t.Fatal("the document was copied, not decoded in place")
		}
	}
	return true
}

// TestPutInPlaceDecodesAsUnmarshal: decodePutInPlace takes a client's
// PutState and gives what proto.Unmarshal gives, except that the document
// is the message's own bytes, and leaves everything else (another
// request, a repeated or unknown field, bytes that do not decode, strings
// that are not UTF-8) to proto.Unmarshal.
func TestPutInPlaceDecodesAsUnmarshal(t *testing.T) {
	t.Parallel()
	taken := 0
	for _, b := range putInPlaceSeeds(t) {
		if checkPutInPlace(t, b) {
			taken++
		}
	}
	// The canonical ones, the empty document, the overlong varint and a
	// document that is not UTF-8 (bytes are not checked).
	if taken != 6 {
		t.Errorf("%d seeds decoded in place, want 6", taken)
	}
}

// FuzzPutInPlace: whatever decodePutInPlace takes, proto.Unmarshal
// decodes to the same message.
func FuzzPutInPlace(f *testing.F) {
	for _, b := range putInPlaceSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkPutInPlace(t, b) })
}
