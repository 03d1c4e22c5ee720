package wstransport_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// TestPipelinedPutsKeepTheirDocuments sends many PutStates at once, each
// with its own document, before reading any answer: the server decodes
// each document in place in a reused read buffer, runs up to MaxInFlight
// of them at once and queues answers behind each other, and a Put's
// answer carries the document it was sent. Every answer and every stored
// entry must still hold its own request's bytes, so no buffer went back
// to be read into while its request ran or its answer waited to be sent.
func TestPipelinedPutsKeepTheirDocuments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	c := e.dial()
	const n = 96
	docs := make(map[uint64][]byte, n)
	for i := range n {
		id := uint64(i + 1)
		docs[id] = testdoc.MediaIntent(300+61*i, i)
		send(t, c, &pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: &pb.PutState{RequestId: id,
			Namespace: "user/alice", Key: fmt.Sprintf("k%d", i), Schema: schema.MediaIntentV1, Document: docs[id]}}})
	}
	for range n {
		res := recv(t, c).GetResult()
		want, ok := docs[res.GetRequestId()]
		if !ok {
			t.Fatalf("an answer to request %d, which was not sent or was answered twice", res.GetRequestId())
		}
		delete(docs, res.GetRequestId())
		if res.GetError() != nil {
			t.Fatalf("request %d: %v", res.GetRequestId(), res.GetError())
		}
		if got := res.GetEntry().GetDocument(); !bytes.Equal(got, want) {
			t.Errorf("request %d was answered with a document of %d bytes that is not its own %d", res.GetRequestId(), len(got), len(want))
		}
	}
	for i := range n {
		got, err := e.store.Get(ctx, admin, "user/alice", fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if want := testdoc.MediaIntent(300+61*i, i); !bytes.Equal(got.Document, want) {
			t.Errorf("k%d stored a document that is not its own", i)
		}
	}
}
