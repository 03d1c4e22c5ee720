package statestore

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// TestForwardCodecRoundTrips: every request and answer shape comes back
// as it went, field by field, and as JSON would have carried it.
func TestForwardCodecRoundTrips(t *testing.T) {
	t.Parallel()
	requests := []fwdRequest{
		{Verb: verbPut, Principal: fwdPrincipal{ID: "svc-ü", Admin: true}, Namespace: "user/alice", Key: "a/b", Schema: "keeppeek.media-intent.v1",
			Document: []byte(`{"role":"publish"}`), ExpectSet: true, ExpectRev: 1 << 40, TTLMs: 30_000},
		{Verb: verbDelete, Principal: fwdPrincipal{ID: "p", System: true}, Namespace: "n", Key: "k", ExpectSet: true},
		{Verb: verbExpire},
		{Verb: verbReadIndex, TTLMs: -1},
	}
	for _, req := range requests {
		got, err := decodeForward(encodeForward(&req))
		if err != nil {
			t.Fatalf("%s: %v", req.Verb, err)
		}
		if !reflect.DeepEqual(got, viaJSON(t, req)) {
			t.Fatalf("%s: decoded %+v, want %+v", req.Verb, got, req)
		}
	}
	answers := []fwdResponse{
		{Index: 7, Entry: &Entry{Namespace: "n", Key: "k", Schema: "s", Owner: "o", Revision: 3, CreatedMs: 1, UpdatedMs: -2, ExpiresMs: 1 << 50, Document: []byte("{}")}},
		{Index: 8, Entry: &Entry{Namespace: "n", Key: "k", Revision: 9}},
		{Index: 9, Err: &fwdError{Code: Conflict, Field: "expected_revision", Message: "current revision 4", CurrentRevision: 4}},
		{Err: &fwdError{Code: Unavailable, Field: "leader", Message: "starting", NotApplied: true}},
		{Index: 1 << 62},
	}
	for i, resp := range answers {
		got, err := decodeAnswer(encodeAnswer(&resp))
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, viaJSON(t, resp)) {
			t.Fatalf("answer %d: decoded %+v, want %+v", i, got, resp)
		}
	}
}

// viaJSON is v as the JSON form carried it (the reference the binary form
// replaces).
func viaJSON[T any](t *testing.T, v T) T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestForwardCodecRefusesDamage: every cut of a body, a trailing byte, a
// wrong first byte and an unknown flag or holder are refused with a
// *ForwardDecodeError naming a field; nothing panics.
func TestForwardCodecRefusesDamage(t *testing.T) {
	t.Parallel()
	req := encodeForward(&fwdRequest{Verb: verbPut, Principal: fwdPrincipal{ID: "p"}, Namespace: "n", Key: "k", Document: []byte("{}"), TTLMs: 5})
	ans := encodeAnswer(&fwdResponse{Index: 3, Entry: &Entry{Namespace: "n", Key: "k", Document: []byte("{}")}})
	errAns := encodeAnswer(&fwdResponse{Err: &fwdError{Code: Conflict, Message: "m"}})
	check := func(name string, err error, field string) {
		t.Helper()
		var de *ForwardDecodeError
		if !errors.As(err, &de) || de.Field == "" || (field != "" && de.Field != field) {
			t.Fatalf("%s: %v, want a *ForwardDecodeError naming %q", name, err, field)
		}
	}
	for n := range len(req) {
		_, err := decodeForward(req[:n])
		check("request cut", err, "")
	}
	for _, a := range [][]byte{ans, errAns} {
		for n := range len(a) {
			_, err := decodeAnswer(a[:n])
			check("answer cut", err, "")
		}
	}
	_, err := decodeForward(append(append([]byte(nil), req...), 0))
	check("trailing byte", err, "end")
	_, err = decodeForward(append([]byte{'{'}, req[1:]...))
	check("JSON first byte", err, "form")
	bad := append([]byte(nil), req...)
	bad[1+1+len(verbPut)+1+1] = 0x80 // the flags byte
	_, err = decodeForward(bad)
	check("unknown flag", err, "flags")
	holds := append([]byte(nil), ans...)
	holds[2] = 7 // after the form byte and the one-byte index
	_, err = decodeAnswer(holds)
	check("unknown holder", err, "holds")
}

// TestForwardDecodeCopies: a decoded document does not alias the body,
// which the transport may reuse once the call returns.
func TestForwardDecodeCopies(t *testing.T) {
	t.Parallel()
	body := encodeForward(&fwdRequest{Verb: verbPut, Document: []byte("abc")})
	req, err := decodeForward(body)
	if err != nil {
		t.Fatal(err)
	}
	clear(body)
	if string(req.Document) != "abc" {
		t.Fatalf("document %q after the body was cleared", req.Document)
	}
}

// FuzzForwardDecode: any body decodes or is refused, without a panic, and
// what decodes encodes to a body that decodes to the same call or answer
// (a varint may come in a longer form than encode writes).
func FuzzForwardDecode(f *testing.F) {
	f.Add(encodeForward(&fwdRequest{Verb: verbPut, Namespace: "n", Key: "k", Document: []byte("{}")}))
	f.Add(encodeAnswer(&fwdResponse{Index: 2, Entry: &Entry{Key: "k"}}))
	f.Add(encodeAnswer(&fwdResponse{Err: &fwdError{Code: NotFound, Message: "m"}}))
	f.Fuzz(func(t *testing.T, body []byte) {
		if req, err := decodeForward(body); err == nil {
			again, err := decodeForward(encodeForward(&req))
			if err != nil || !reflect.DeepEqual(again, req) {
				t.Fatalf("request %x: %+v re-encoded decodes as %+v (%v)", body, req, again, err)
			}
		}
		if resp, err := decodeAnswer(body); err == nil {
			again, err := decodeAnswer(encodeAnswer(&resp))
			if err != nil || !reflect.DeepEqual(again, resp) {
				t.Fatalf("answer %x: %+v re-encoded decodes as %+v (%v)", body, resp, again, err)
			}
		}
	})
}
