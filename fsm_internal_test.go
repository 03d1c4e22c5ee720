package statestore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/keeppeek/statestore/journal"
)

// TestEntryCodec: a raft entry round-trips its records, and every kind of
// damage (a flipped bit under a record's CRC, a cut, trailing bytes, a
// foreign entry) is refused naming the raft index.
func TestEntryCodec(t *testing.T) {
	t.Parallel()
	recs := []*journal.Record{
		{Kind: journal.KindPut, Namespace: "group/g", Key: "a", Revision: 1, TimeMs: 5, Schema: "s", Owner: "o", CreatedMs: 5, UpdatedMs: 5, ExpiresMs: 9, Document: []byte(`{"x":1}`)},
		{Kind: journal.KindDelete, Namespace: "group/g", Key: "a", Revision: 2, TimeMs: 6},
		{Kind: journal.KindExpire, Namespace: "group/h", Key: "b", Revision: 7, TimeMs: 6},
	}
	data, err := encodeEntry(recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeEntry(3, data, journal.DefaultLimits)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("decode = %d records, %v", len(got), err)
	}
	for i := range recs {
		a, _ := recs[i].Encode()
		b, _ := got[i].Encode()
		if !bytes.Equal(a, b) {
			t.Fatalf("record %d changed: %+v", i, got[i])
		}
	}
	flip := bytes.Clone(data)
	flip[len(flip)/2] ^= 1
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"bit flip", flip},
		{"cut", data[:len(data)-3]},
		{"trailing", append(bytes.Clone(data), 0)},
		{"foreign", []byte("not a batch")},
		{"empty", nil},
	} {
		_, err := decodeEntry(42, tc.data, journal.DefaultLimits)
		var ee *EntryError
		if !errors.As(err, &ee) || ee.Index != 42 {
			t.Errorf("%s: %v, want an EntryError at index 42", tc.name, err)
		}
	}
}
