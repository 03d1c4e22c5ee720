package statestore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"

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

// fakeFuture is a finished raft.ApplyFuture.
type fakeFuture struct {
	err  error
	resp any
}

func (f fakeFuture) Error() error  { return f.err }
func (f fakeFuture) Response() any { return f.resp }
func (f fakeFuture) Index() uint64 { return 7 }

// TestRaftOutcome pins the answer for each way an Apply ends: applied;
// not applied anywhere (retried at the leader); unknown (UNAVAILABLE, field
// commit, never a success); the leader's own log failing (STORAGE).
func TestRaftOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		f      fakeFuture
		code   Code
		field  string
		retry  bool
		wantOK bool
	}{
		{name: "applied", f: fakeFuture{}, wantOK: true},
		{name: "refused by the state machine", f: fakeFuture{resp: errors.New("revision 3 after 5")}, code: Unavailable, field: "leader", retry: true},
		{name: "not leader", f: fakeFuture{err: raft.ErrNotLeader}, code: Unavailable, field: "leader", retry: true},
		{name: "enqueue timeout", f: fakeFuture{err: raft.ErrEnqueueTimeout}, code: Unavailable, field: "leader", retry: true},
		{name: "transfer", f: fakeFuture{err: raft.ErrLeadershipTransferInProgress}, code: Unavailable, field: "leader", retry: true},
		{name: "leadership lost", f: fakeFuture{err: raft.ErrLeadershipLost}, code: Unavailable, field: "commit"},
		{name: "shutdown", f: fakeFuture{err: raft.ErrRaftShutdown}, code: Unavailable, field: "commit"},
		{name: "log failure", f: fakeFuture{err: errors.New("write raft log: no space left on device")}, code: Storage, field: "raft log"},
	} {
		err := raftOutcome(tc.f)
		if tc.wantOK {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var se *Error
		if !errors.As(err, &se) || se.Code != tc.code || se.Field != tc.field || retryable(err) != tc.retry {
			t.Errorf("%s: %v (retryable %v), want %v on %q, retryable %v", tc.name, err, retryable(err), tc.code, tc.field, tc.retry)
		}
	}
}
