package statestore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

const intentNS, intentKey = "service/transcoder-a", "intents/front-door-video"

// publishIntent is a keeppeek.media-intent.v1 document: publish the front door
// camera's video at the given priority.
func publishIntent(priority int) []byte {
	return fmt.Appendf(nil, `{"role":"publish","desired":true,"source_id":"front-door",`+
		`"media_kind":"video","priority":%d,"recording_mode":"disabled"}`, priority)
}

func Example_readme() {
	dir, err := os.MkdirTemp("", "statestore-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := statestore.Open(statestore.Options{Dir: dir}) // the store lives in dir/state-store
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	// Your session layer authenticates principals; service/ needs an administrator.
	coord := statestore.Principal{ID: "coordinator-a", Admin: true}

	// Create the intent; CreateOnly fails with CONFLICT if the key exists.
	e, err := s.Put(ctx, coord, statestore.PutRequest{Namespace: intentNS, Key: intentKey,
		Schema: schema.MediaIntentV1, Document: publishIntent(10), Expect: statestore.CreateOnly})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created at revision", e.Revision)

	// Compare-and-set: replace it only if nobody changed it since revision e.Revision.
	e, err = s.Put(ctx, coord, statestore.PutRequest{Namespace: intentNS, Key: intentKey,
		Schema: schema.MediaIntentV1, Document: publishIntent(50), Expect: statestore.IfRevision(e.Revision)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replaced at revision", e.Revision)

	// Watch the intents/ prefix: the snapshot first, then one update per change.
	sink := watch.NewChanSink(0)
	sess, err := s.OpenSession(coord, sink)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	snap, err := s.Watch(ctx, sess, statestore.WatchRequest{WatchID: "intents", Namespace: intentNS, KeyPrefix: "intents/"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("watching from revision %d with %d entries\n", snap.SnapshotRevision, len(snap.Entries))
	<-sink.C() // the same snapshot, delivered as the watch's first message

	// A writer still holding the first revision loses and must reread.
	_, err = s.Put(ctx, coord, statestore.PutRequest{Namespace: intentNS, Key: intentKey,
		Schema: schema.MediaIntentV1, Document: publishIntent(90), Expect: statestore.IfRevision(1)})
	var se *statestore.Error
	if !errors.As(err, &se) || se.Code != statestore.Conflict {
		log.Fatalf("want CONFLICT, got %v", err)
	}
	fmt.Println("stale write:", se.Code, "current revision", se.CurrentRevision)
	if _, err := s.Put(ctx, coord, statestore.PutRequest{Namespace: intentNS, Key: intentKey,
		Schema: schema.MediaIntentV1, Document: publishIntent(90), Expect: statestore.IfRevision(se.CurrentRevision)}); err != nil {
		log.Fatal(err)
	}

	// Wait for the update before closing; acknowledge it once applied.
	switch m := (<-sink.C()).(type) {
	case *watch.Update:
		fmt.Printf("update %d: %s %s at revision %d\n", m.Sequence, m.Kind, m.Key, m.Revision)
		if err := s.Ack(sess, m.WatchID, m.Sequence); err != nil {
			log.Fatal(err)
		}
	case *watch.Closed:
		log.Fatalf("watch closed: %s", m.Reason)
	}
	// Output:
	// created at revision 1
	// replaced at revision 2
	// watching from revision 2 with 1 entries
	// stale write: CONFLICT current revision 2
	// update 1: PUT intents/front-door-video at revision 3
}
