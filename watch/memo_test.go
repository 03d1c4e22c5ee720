package watch_test

import (
	"testing"

	"github.com/keeppeek/statestore/watch"
)

// TestUpdatesOfOneEventShareAMemo: every update one event produces, over
// watches of two sessions, carries the same Memo, the updates of another
// event (of the same batch too) another one, and the memo encodes once
// whichever update asks.
func TestUpdatesOfOneEventShareAMemo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watch.Limits{})
	const ns = "user/alice"
	s1, sink1 := e.session("alice")
	s2, sink2 := e.session("bob")
	e.add(s1, "a", ns, "")
	e.add(s1, "b", ns, "k")
	e.add(s2, "c", ns, "")
	e.r.Publish([]watch.Event{put(ns, "k", 1), {Revision: 2, Kind: watch.Delete, Namespace: ns, Key: "k"}})
	var updates []*watch.Update
	for _, m := range append(e.drain(s1, sink1), e.drain(s2, sink2)...) {
		if u, ok := m.(*watch.Update); ok {
			updates = append(updates, u)
		}
	}
	if len(updates) != 6 {
		t.Fatalf("%d updates, want 6", len(updates))
	}
	memos := map[uint64]*watch.Memo{}
	for _, u := range updates {
		if u.Memo == nil {
			t.Fatalf("update %+v has no memo", u)
		}
		if m, ok := memos[u.Revision]; ok && m != u.Memo {
			t.Fatalf("two updates of revision %d hold different memos", u.Revision)
		}
		memos[u.Revision] = u.Memo
	}
	if len(memos) != 2 || memos[1] == memos[2] {
		t.Fatalf("the two events share a memo: %v", memos)
	}
	encodes := 0
	for _, u := range updates {
		if u.Revision != 1 {
			continue
		}
		b, err := u.Memo.Encoded(u, func(u *watch.Update) ([]byte, error) {
			encodes++
			return []byte(u.Key), nil
		})
		if err != nil || string(b) != "k" {
			t.Fatalf("Encoded = %q, %v", b, err)
		}
	}
	if encodes != 1 {
		t.Fatalf("the memo encoded %d times for one event", encodes)
	}
}
