package statestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// Open a store, write one entry as its owner and read it back.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "statestore-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := statestore.Open(statestore.Options{Dir: dir}) // files go to dir/state-store
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	alice := statestore.Principal{ID: "alice"} // user/alice/ is hers: no admin needed
	doc := []byte(`{"role":"subscribe","desired":true,"source_id":"front-door","media_kind":"video"}`)
	if _, err := s.Put(ctx, alice, statestore.PutRequest{Namespace: "user/alice", Key: "subscriptions/front-door",
		Schema: schema.MediaIntentV1, Document: doc}); err != nil {
		log.Fatal(err)
	}
	e, err := s.Get(ctx, alice, "user/alice", "subscriptions/front-door")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s/%s revision %d owner %s schema %s\n", e.Namespace, e.Key, e.Revision, e.Owner, e.Schema)

	// Another user is refused, and the message names the policy rule.
	_, err = s.Get(ctx, statestore.Principal{ID: "bob"}, "user/alice", "subscriptions/front-door")
	fmt.Println(err)
	// Output:
	// user/alice/subscriptions/front-door revision 1 owner alice schema keeppeek.media-intent.v1
	// PERMISSION_DENIED: namespace: principal "bob" may not read namespace "user/alice" (rule user/<owner-id>/: only the owner "alice" or an administrator reads and writes)
}

// CreateOnly writes only a key that does not exist; IfRevision(n) replaces
// (or deletes) only the revision the writer read.
func ExampleStore_Put() {
	dir, err := os.MkdirTemp("", "statestore-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	coord := statestore.Principal{ID: "coordinator-a", Admin: true}
	put := func(doc string, x statestore.Expect) (statestore.Entry, error) {
		return s.Put(ctx, coord, statestore.PutRequest{Namespace: "service/transcoder-a", Key: "intents/front-door-video",
			Schema: schema.MediaIntentV1, Document: []byte(doc), Expect: x})
	}
	const v1 = `{"role":"publish","desired":true,"source_id":"front-door","media_kind":"video","recording_mode":"disabled"}`
	const v2 = `{"role":"publish","desired":false,"source_id":"front-door","media_kind":"video","recording_mode":"disabled"}`

	e, err := put(v1, statestore.CreateOnly)
	fmt.Println("create:", e.Revision, err)
	_, err = put(v1, statestore.CreateOnly)
	fmt.Println("create again:", err)
	e, err = put(v2, statestore.IfRevision(e.Revision))
	fmt.Println("replace revision 1:", e.Revision, err)
	rev, err := s.Delete(ctx, coord, statestore.DeleteRequest{Namespace: "service/transcoder-a", Key: "intents/front-door-video",
		Expect: statestore.IfRevision(e.Revision)})
	fmt.Println("delete revision 2:", rev, err)
	// Output:
	// create: 1 <nil>
	// create again: CONFLICT: expected_revision: create-only write but the key exists (current revision 1)
	// replace revision 1: 2 <nil>
	// delete revision 2: 3 <nil>
}

// A writer that loses a compare-and-set rereads, merges its own intent into
// the current document and retries with the revision it read. It never
// retries blind: that would discard the other writer's state.
func ExampleStore_Put_conflict() {
	dir, err := os.MkdirTemp("", "statestore-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	a := statestore.Principal{ID: "coordinator-a", Admin: true}
	b := statestore.Principal{ID: "coordinator-b", Admin: true}
	const ns, key = "service/transcoder-a", "intents/front-door-video"
	intent := func(priority int) []byte {
		return fmt.Appendf(nil, `{"role":"publish","desired":true,"source_id":"front-door","media_kind":"video","priority":%d,"recording_mode":"disabled"}`, priority)
	}
	base, err := s.Put(ctx, a, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: intent(10)})
	if err != nil {
		log.Fatal(err)
	}
	// Both coordinators read revision 1; a writes first.
	if _, err := s.Put(ctx, a, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1,
		Document: intent(50), Expect: statestore.IfRevision(base.Revision)}); err != nil {
		log.Fatal(err)
	}
	expect := statestore.IfRevision(base.Revision)
	for attempt := 1; ; attempt++ {
		e, err := s.Put(ctx, b, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1,
			Document: intent(90), Expect: expect})
		if err == nil {
			fmt.Printf("attempt %d: written at revision %d\n", attempt, e.Revision)
			break
		}
		if !errors.Is(err, statestore.ErrConflict) {
			log.Fatal(err)
		}
		fmt.Printf("attempt %d: %v\n", attempt, err)
		cur, err := s.Get(ctx, b, ns, key) // reread, then merge into cur.Document
		if err != nil {
			log.Fatal(err)
		}
		expect = statestore.IfRevision(cur.Revision)
	}
	// Output:
	// attempt 1: CONFLICT: expected_revision: expected revision 1 (current revision 2)
	// attempt 2: written at revision 3
}

// The specification's lease pattern, on a fake clock: a worker claims a
// lease create-only with a TTL and renews it with compare-and-set; a
// standby's claim conflicts until the holder stops renewing and the lease
// lapses.
func ExampleStore_Put_lease() {
	dir, err := os.MkdirTemp("", "statestore-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	clk := clock.NewFake(time.UnixMilli(1_750_000_000_000))
	s, err := statestore.Open(statestore.Options{Dir: dir, Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	w1 := statestore.Principal{ID: "worker-1", Admin: true}
	w2 := statestore.Principal{ID: "worker-2", Admin: true}
	const ns, key = "service/transcoder-a", "leases/front-door-video-browser-h264-720p"
	lease := func(p statestore.Principal, x statestore.Expect) (statestore.Entry, error) {
		return s.Put(ctx, p, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, TTL: 10 * time.Second, Expect: x,
			Document: []byte(`{"role":"publish","desired":true,"source_id":"front-door","media_kind":"video","recording_mode":"inherit"}`)})
	}
	held, err := lease(w1, statestore.CreateOnly)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("worker-1 holds revision %d for %v\n", held.Revision, time.Duration(held.ExpiresMs-clk.Now().UnixMilli())*time.Millisecond)
	_, err = lease(w2, statestore.CreateOnly)
	fmt.Println("worker-2 claims:", statestore.CodeOf(err))

	clk.Advance(5 * time.Second)
	held, err = lease(w1, statestore.IfRevision(held.Revision)) // renew before the deadline
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("worker-1 renews: revision %d, %v left\n", held.Revision, time.Duration(held.ExpiresMs-clk.Now().UnixMilli())*time.Millisecond)

	clk.Advance(10 * time.Second) // worker-1 stopped renewing: the deadline is reached
	_, err = s.Get(ctx, w2, ns, key)
	fmt.Println("after the deadline:", statestore.CodeOf(err), "namespace revision", s.Namespace(ns).Revision)
	won, err := lease(w2, statestore.CreateOnly)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("worker-2 claims: revision %d owner %s\n", won.Revision, won.Owner)
	// Output:
	// worker-1 holds revision 1 for 10s
	// worker-2 claims: CONFLICT
	// worker-1 renews: revision 2, 10s left
	// after the deadline: NOT_FOUND namespace revision 3
	// worker-2 claims: revision 4 owner worker-2
}

// A session delivers a watch's snapshot and updates to its Sink, here a
// watch.ChanSink read by this goroutine. To be sure an update has arrived
// before closing, receive it from the sink; Ack it once applied so the
// watch's buffer frees; Close the session and wait for Done.
func ExampleStore_Watch() {
	dir, err := os.MkdirTemp("", "statestore-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	coord := statestore.Principal{ID: "coordinator-a", Admin: true}
	sink := watch.NewChanSink(0) // default bound: never refuses before the watch's own bound
	sess, err := s.OpenSession(coord, sink)
	if err != nil {
		log.Fatal(err)
	}
	res, err := s.Watch(ctx, sess, statestore.WatchRequest{RequestID: 41, WatchID: "transcode-intents",
		Namespace: "service/transcoder-a", KeyPrefix: "intents/"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("snapshot_revision", res.SnapshotRevision, "entries", len(res.Entries))

	for _, key := range []string{"intents/front-door-video", "status/worker-1", "intents/back-yard-video"} {
		if _, err := s.Put(ctx, coord, statestore.PutRequest{Namespace: "service/transcoder-a", Key: key, Schema: schema.MediaIntentV1,
			Document: []byte(`{"role":"subscribe","desired":true,"source_id":"front-door","media_kind":"video"}`)}); err != nil {
			log.Fatal(err)
		}
	}
	// The snapshot comes first, then one update per matching write: the
	// status/ key is outside the prefix, so revision 2 is skipped.
	for applied := 0; applied < 2; {
		switch m := (<-sink.C()).(type) {
		case *watch.Snapshot:
			fmt.Println("snapshot for request", m.RequestID)
		case *watch.Update:
			fmt.Printf("watch_sequence %d revision %d %s %s\n", m.Sequence, m.Revision, m.Kind, m.Key)
			if err := s.Ack(sess, m.WatchID, m.Sequence); err != nil {
				log.Fatal(err)
			}
			applied++
		case *watch.Closed: // a new Watch (a fresh snapshot) is the only way on
			log.Fatalf("watch %s closed: %s", m.WatchID, m.Reason)
		}
	}
	sess.Close()
	<-sess.Done() // nothing is delivered to the sink after this
	fmt.Println("session closed")
	// Output:
	// snapshot_revision 0 entries 0
	// snapshot for request 41
	// watch_sequence 1 revision 1 PUT intents/front-door-video
	// watch_sequence 2 revision 3 PUT intents/back-yard-video
	// session closed
}

// Backup writes one file while the store keeps serving; RestoreDir builds a
// store from it elsewhere, with the same namespace and entry revisions.
func ExampleStore_Backup() {
	dir, err := os.MkdirTemp("", "statestore-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := statestore.Open(statestore.Options{Dir: dir + "/live"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	alice := statestore.Principal{ID: "alice"}
	for range 3 {
		if _, err := s.Put(ctx, alice, statestore.PutRequest{Namespace: "user/alice", Key: "prefs/group", Schema: schema.MediaIntentV1,
			Document: []byte(`{"role":"subscribe","desired":true,"source_id":"lobby-cam","media_kind":"audio"}`)}); err != nil {
			log.Fatal(err)
		}
	}
	var backup bytes.Buffer // a file in practice
	if err := s.Backup(&backup); err != nil {
		log.Fatal(err)
	}

	if err := statestore.RestoreDir(dir+"/restored", &backup, quota.Limits{}); err != nil {
		log.Fatal(err)
	}
	r, err := statestore.Open(statestore.Options{Dir: dir + "/restored"})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	e, err := r.Get(ctx, alice, "user/alice", "prefs/group")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("restored entry revision", e.Revision, "namespace revision", r.Namespace("user/alice").Revision)
	// Output:
	// restored entry revision 3 namespace revision 3
}

// Restore replaces an open store's state with a backup: revisions and
// counters come back together, and every watch is closed with RESTORED,
// because no watch sequence carries across a restore; clients watch anew.
func ExampleStore_Restore() {
	dir, err := os.MkdirTemp("", "statestore-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	alice := statestore.Principal{ID: "alice"}
	put := func(source string) statestore.Entry {
		e, err := s.Put(ctx, alice, statestore.PutRequest{Namespace: "user/alice", Key: "prefs/camera", Schema: schema.MediaIntentV1,
			Document: fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":%q,"media_kind":"video"}`, source)})
		if err != nil {
			log.Fatal(err)
		}
		return e
	}
	put("front-door")
	var backup bytes.Buffer
	if err := s.Backup(&backup); err != nil {
		log.Fatal(err)
	}
	put("back-yard")

	sink := watch.NewChanSink(0)
	sess, err := s.OpenSession(alice, sink)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	if _, err := s.Watch(ctx, sess, statestore.WatchRequest{WatchID: "prefs", Namespace: "user/alice"}); err != nil {
		log.Fatal(err)
	}
	<-sink.C() // the snapshot

	if err := s.Restore(&backup); err != nil {
		log.Fatal(err)
	}
	if m, ok := (<-sink.C()).(*watch.Closed); ok {
		fmt.Println("watch closed:", m.Reason)
	}
	e, err := s.Get(ctx, alice, "user/alice", "prefs/camera")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after restore: revision %d %s\n", e.Revision, e.Document)
	fmt.Println("next write: revision", put("side-gate").Revision)
	// Output:
	// watch closed: RESTORED
	// after restore: revision 1 {"role":"subscribe","desired":true,"source_id":"front-door","media_kind":"video"}
	// next write: revision 2
}
