package wirestore

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// TestEveryCodeRoundTrips checks the code table both ways: every store code
// maps to the wire code of the same spelling and back, every wire code but
// UNSPECIFIED is reached, and neither UNSPECIFIED nor an unknown number is
// taken for a known code.
func TestEveryCodeRoundTrips(t *testing.T) {
	t.Parallel()
	reached := map[pb.StateStoreErrorCode]bool{}
	for c := statestore.NotFound; c <= statestore.Unavailable; c++ {
		w := Code(c)
		if want := "STATE_STORE_ERROR_CODE_" + c.String(); w.String() != want {
			t.Errorf("%v maps to %v, want %s", c, w, want)
		}
		if back, ok := StoreCode(w); !ok || back != c {
			t.Errorf("%v comes back as %v, %v", w, back, ok)
		}
		reached[w] = true
	}
	if values := pb.StateStoreErrorCode(0).Descriptor().Values().Len(); len(reached) != values-1 {
		t.Errorf("%d wire codes reached, the enum has %d besides UNSPECIFIED", len(reached), values-1)
	}
	if Code(statestore.OK) != 0 || Code(statestore.Unavailable+1) != 0 || Code(-1) != 0 {
		t.Error("OK or an unknown code maps to a wire code")
	}
	for _, w := range []pb.StateStoreErrorCode{0, pb.StateStoreErrorCode(len(reached) + 1), -1} {
		if c, ok := StoreCode(w); ok || c != statestore.OK {
			t.Errorf("wire code %d maps to %v, %v", w, c, ok)
		}
	}
}

type foreign string

func (e foreign) Error() string { return string(e) }

// TestErrorRoundTrips sends errors through their wire form and back: the
// client's *statestore.Error matches the server's in code, field, message
// and current revision, so code written against the library works.
func TestErrorRoundTrips(t *testing.T) {
	t.Parallel()
	for c := statestore.NotFound; c <= statestore.Unavailable; c++ {
		in := &statestore.Error{Code: c, Field: "expected_revision", Message: "want 3", CurrentRevision: uint64(c) * 10}
		out := StoreError(roundTrip(t, Error(in)))
		if out.Code != in.Code || out.Field != in.Field || out.Message != in.Message || out.CurrentRevision != in.CurrentRevision {
			t.Errorf("%v came back as %+v", in, out)
		}
		if !errors.Is(out, &statestore.Error{Code: c}) || statestore.CodeOf(out) != c {
			t.Errorf("%v does not match its own code", out)
		}
	}
	// Wrapped, the store's error is still found; without a message, the
	// formatted error is the message.
	out := StoreError(Error(fmt.Errorf("context: %w", &statestore.Error{Code: statestore.Conflict, Field: "key", CurrentRevision: 5})))
	if out.Code != statestore.Conflict || out.CurrentRevision != 5 || !strings.Contains(out.Message, "CONFLICT: key") {
		t.Errorf("wrapped conflict came back as %+v", out)
	}
	// An error that is not the store's is UNAVAILABLE with its text.
	if m := Error(foreign("disk on fire")); m.GetCode() != pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNAVAILABLE || m.GetMessage() != "disk on fire" {
		t.Errorf("foreign error answered as %v", m)
	}
	// A code this client does not know is UNAVAILABLE naming it.
	out = StoreError(&pb.StateStoreError{Code: 99, Field: "f", Message: "new"})
	if out.Code != statestore.Unavailable || out.Field != "f" || !strings.Contains(out.Message, "99") || !strings.HasSuffix(out.Message, "new") {
		t.Errorf("unknown code came back as %+v", out)
	}
}

// TestRequestsRoundTrip sends each form of write through the wire and back.
func TestRequestsRoundTrip(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"a":1}`)
	expects := []statestore.Expect{{}, statestore.CreateOnly, statestore.IfRevision(7)}
	for _, x := range expects {
		for _, ttl := range []time.Duration{0, time.Second, 1500 * time.Millisecond, 24 * time.Hour} {
			in := statestore.PutRequest{Namespace: "user/alice", Key: "k", Schema: "s", Document: doc, Expect: x, TTL: ttl}
			m, err := PutState(9, in)
			if err != nil {
				t.Fatal(err)
			}
			m = roundTrip(t, m)
			if m.GetRequestId() != 9 {
				t.Errorf("request id %d, want 9", m.GetRequestId())
			}
			if _, set := x.Revision(); set != (m.ExpectedRevision != nil) {
				t.Errorf("%+v: expected_revision present = %v", x, m.ExpectedRevision != nil)
			}
			if got := StorePutRequest(m); !reflect.DeepEqual(got, in) {
				t.Errorf("put came back as %+v, want %+v", got, in)
			}
		}
		in := statestore.DeleteRequest{Namespace: "user/alice", Key: "k", Expect: x}
		m := roundTrip(t, DeleteState(3, in))
		if got := StoreDeleteRequest(m); m.GetRequestId() != 3 || !reflect.DeepEqual(got, in) {
			t.Errorf("delete came back as %+v (id %d), want %+v", got, m.GetRequestId(), in)
		}
	}
	// A positive TTL never becomes "no lease"; the wire has milliseconds.
	for d, want := range map[time.Duration]uint64{time.Nanosecond: 1, time.Millisecond: 1, 1001 * time.Microsecond: 2,
		time.Duration(math.MaxInt64): uint64(math.MaxInt64/int64(time.Millisecond)) + 1} {
		m, err := PutState(1, statestore.PutRequest{TTL: d})
		if err != nil || m.GetTtlMs() != want {
			t.Errorf("ttl %v travels as %d ms (%v), want %d", d, m.GetTtlMs(), err, want)
		}
	}
	if d := storeTTL(math.MaxUint64); d != time.Duration(math.MaxInt64) {
		t.Errorf("ttl_ms past the range gives %v, want the saturated maximum", d)
	}
	m, err := PutState(1, statestore.PutRequest{TTL: -time.Second})
	if m != nil || statestore.CodeOf(err) != statestore.TTLInvalid || !strings.Contains(err.Error(), "ttl") {
		t.Errorf("negative ttl: %v, %v; want TTL_INVALID naming ttl", m, err)
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

// TestFillPutStateReusesItsMessage fills one PutState again and again, as
// the client's reused request does: each fill is what PutState builds for
// its request, a blind write after a conditional one carries no
// expected_revision, and a refused TTL leaves the message as it was.
func TestFillPutStateReusesItsMessage(t *testing.T) {
	t.Parallel()
	var m pb.PutState
	var rev uint64
	for i, in := range []statestore.PutRequest{
		{Namespace: "user/alice", Key: "a", Schema: "s", Document: []byte(`{"a":1}`), Expect: statestore.IfRevision(7), TTL: time.Second},
		{Namespace: "user/bob", Key: "b", Document: []byte(`{}`)},
		{Namespace: "user/carol", Key: "c", Expect: statestore.CreateOnly},
		{Namespace: "user/dave", Key: "d", Expect: statestore.IfRevision(9)},
	} {
		if err := FillPutState(&m, &rev, uint64(i+1), in); err != nil {
			t.Fatal(err)
		}
		want, err := PutState(uint64(i+1), in)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&m, want) {
			t.Errorf("fill %d: %v, want %v", i, &m, want)
		}
		if got := StorePutRequest(roundTrip(t, &m)); !reflect.DeepEqual(got, in) {
			t.Errorf("fill %d came back as %+v, want %+v", i, got, in)
		}
	}
	before := proto.Clone(&m)
	if err := FillPutState(&m, &rev, 99, statestore.PutRequest{Key: "x", TTL: -1}); statestore.CodeOf(err) != statestore.TTLInvalid {
		t.Errorf("negative ttl: %v, want TTL_INVALID", err)
	}
	if !proto.Equal(&m, before) {
		t.Errorf("a refused fill changed the message to %v", &m)
	}
}
