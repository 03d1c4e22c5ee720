package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// exampleServer serves a new store over the wire protocol on a loopback
// port, as kpstate serve would, accepting the bearer token
// "example-token" as an administrator. It returns the endpoint and a
// function that stops everything and removes the store.
func exampleServer() (endpoint string, stop func()) {
	dir, err := os.MkdirTemp("", "client-example-")
	if err != nil {
		log.Fatal(err)
	}
	store, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	auth := wstransport.TokenAuthenticator{Token: "example-token", Principal: statestore.Principal{ID: "coordinator-a", Admin: true}}
	ws, err := wstransport.NewHandler(dispatch.New(store, dispatch.Options{}), wstransport.Options{Authenticator: auth})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(client.WebSocketPath, ws)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	return "ws://" + ln.Addr().String(), func() {
		ws.Close() // ends the sessions, which http.Server.Close does not know of
		srv.Close()
		<-served
		store.Close()
		os.RemoveAll(dir)
	}
}

// publishIntent is a keeppeek.media-intent.v1 document: publish the front
// door camera's video at the given priority.
func publishIntent(priority int) []byte {
	return fmt.Appendf(nil, `{"role":"publish","desired":true,"source_id":"front-door",`+
		`"media_kind":"video","priority":%d,"recording_mode":"disabled"}`, priority)
}

// Dial a server, write an entry and read it back.
func ExampleDial() {
	endpoint, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	c, err := client.Dial(ctx, client.Config{Endpoints: []string{endpoint}, Token: "example-token"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	e, err := c.Put(ctx, statestore.PutRequest{Namespace: "service/transcoder-a", Key: "intents/front-door-video",
		Schema: schema.MediaIntentV1, Document: publishIntent(10), Expect: statestore.CreateOnly})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("created %s at revision %d, owned by %s\n", e.Key, e.Revision, e.Owner)

	got, err := c.Get(ctx, "service/transcoder-a", "intents/front-door-video")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read revision %d: %s\n", got.Revision, got.Document)

	_, err = c.Get(ctx, "service/transcoder-a", "intents/back-door-video")
	fmt.Println("a missing key:", statestore.CodeOf(err))
	// Output:
	// created intents/front-door-video at revision 1, owned by coordinator-a
	// read revision 1: {"role":"publish","desired":true,"source_id":"front-door","media_kind":"video","priority":10,"recording_mode":"disabled"}
	// a missing key: NOT_FOUND
}

// Compare-and-set over the wire: a writer holding a stale revision loses
// with CONFLICT, learns the current revision from the error, and retries
// on it, exactly as against a store in the same process.
func ExampleClient_Put_compareAndSet() {
	endpoint, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, client.Config{Endpoints: []string{endpoint}, Token: "example-token"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	put := func(priority int, x statestore.Expect) (statestore.Entry, error) {
		return c.Put(ctx, statestore.PutRequest{Namespace: "service/transcoder-a", Key: "intents/front-door-video",
			Schema: schema.MediaIntentV1, Document: publishIntent(priority), Expect: x})
	}

	first, err := put(10, statestore.CreateOnly)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := put(50, statestore.IfRevision(first.Revision)); err != nil {
		log.Fatal(err)
	}
	// Another writer still holds the first revision.
	_, err = put(90, statestore.IfRevision(first.Revision))
	var se *statestore.Error
	if !errors.As(err, &se) || se.Code != statestore.Conflict {
		log.Fatalf("want CONFLICT, got %v", err)
	}
	fmt.Println("stale write:", se.Code, "on", se.Field, "current revision", se.CurrentRevision)
	e, err := put(90, statestore.IfRevision(se.CurrentRevision))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried on the current revision: now", e.Revision)
	// Output:
	// stale write: CONFLICT on expected_revision current revision 2
	// retried on the current revision: now 3
}

// Watch a prefix: the snapshot first, then one update per change. Calling
// Next again acknowledges the update it returned before.
func ExampleClient_Watch() {
	endpoint, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, client.Config{Endpoints: []string{endpoint}, Token: "example-token"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	put := func(priority int) {
		if _, err := c.Put(ctx, statestore.PutRequest{Namespace: "service/transcoder-a", Key: "intents/front-door-video",
			Schema: schema.MediaIntentV1, Document: publishIntent(priority)}); err != nil {
			log.Fatal(err)
		}
	}
	put(10)

	w, err := c.Watch(ctx, "service/transcoder-a", "intents/")
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	put(50)
	if _, err := c.Delete(ctx, statestore.DeleteRequest{Namespace: "service/transcoder-a", Key: "intents/front-door-video"}); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		ev, err := w.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Kind {
		case client.EventSnapshot, client.EventResnapshot:
			fmt.Printf("%s at revision %d: %d entries\n", ev.Kind, ev.Revision, len(ev.Entries))
		case client.EventUpdate:
			fmt.Printf("update %d: %s %s at revision %d\n", ev.Sequence, ev.Update, ev.Key, ev.Revision)
		}
	}
	// Output:
	// snapshot at revision 1: 1 entries
	// update 1: PUT intents/front-door-video at revision 2
	// update 2: DELETE intents/front-door-video at revision 3
}
