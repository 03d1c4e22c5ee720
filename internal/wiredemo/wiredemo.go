// Package wiredemo drives the specification's sequence diagram ("Watches
// without a snapshot gap") through a real dispatcher over the framing on
// an in-memory pipe, message for message. The dispatch package's golden
// test and the kpjournal demo both run it, so the demo shows exactly the
// exchange the golden file pins.
//
// The run is deterministic: a fake clock fixes every timestamp and lets
// the lease elapse without waiting, and the namespace is brought to
// revision 120 first so the revisions match the diagram's.
package wiredemo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// The diagram's names.
const (
	Namespace = "service/transcoder-a"
	Prefix    = "intents/"
	WatchID   = "transcode-intents"
)

// Start is the fake clock's reading when the run begins.
var Start = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// Step is one message of the exchange, in wire order.
type Step struct {
	FromClient bool // C->K; otherwise K->C
	Message    proto.Message
}

func intent(source string) []byte {
	return fmt.Appendf(nil, `{"role":"publish","desired":true,"source_id":%q,"media_kind":"video","output_profile":"browser-h264-720p","recording_mode":"disabled"}`, source)
}

// Run opens a store in dir on a fake clock, plays the diagram and calls
// step for each message as it crosses the pipe.
func Run(dir string, step func(Step)) (err error) {
	clk := clock.NewFake(Start)
	s, err := statestore.Open(statestore.Options{Dir: dir, Clock: clk})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	ctx := context.Background()
	coordinator := statestore.Principal{ID: "coordinator", Admin: true}
	service := statestore.Principal{ID: "transcoder-a", Admin: true}
	put := func(key string, doc []byte, ttl time.Duration) error {
		_, err := s.Put(ctx, service, statestore.PutRequest{Namespace: Namespace, Key: key, Schema: schema.MediaIntentV1, Document: doc, TTL: ttl})
		return err
	}
	// Revisions 1..119 outside the watched prefix, then the one intent
	// the snapshot holds at revision 120.
	for i := 1; i < 120; i++ {
		if err := put("status/worker", intent(fmt.Sprintf("status-%d", i)), 0); err != nil {
			return err
		}
	}
	if err := put(Prefix+"front-door-video", intent("front-door"), 0); err != nil {
		return err
	}

	srvSide, cliSide := net.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- dispatch.New(s, dispatch.Options{}).Serve(ctx, coordinator, dispatch.NewStreamConn(srvSide, 0))
	}()
	c := framing.NewConn[*pb.ServerMessage, *pb.ClientMessage](cliSide, 0, func() *pb.ServerMessage { return new(pb.ServerMessage) })
	send := func(m *pb.ClientMessage) error {
		step(Step{FromClient: true, Message: m})
		return c.Send(m)
	}
	recv := func(want string) error {
		m, err := c.Recv()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", want, err)
		}
		step(Step{Message: m})
		return nil
	}

	if err := send(&pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{
		RequestId: 41, WatchId: WatchID, Namespace: Namespace, KeyPrefix: Prefix}}}); err != nil {
		return err
	}
	if err := recv("the snapshot"); err != nil {
		return err
	}
	// Revision 121: a leased intent, which reaches the watch as update 1.
	if err := put(Prefix+"lobby-video", intent("lobby"), time.Second); err != nil {
		return err
	}
	if err := recv("update 1"); err != nil {
		return err
	}
	if err := send(&pb.ClientMessage{Message: &pb.ClientMessage_WatchStateAck{WatchStateAck: &pb.WatchStateAck{
		RequestId: 42, WatchId: WatchID, AppliedSequence: 1}}}); err != nil {
		return err
	}
	if err := recv("the ack result"); err != nil {
		return err
	}
	// The lease elapses: revision 122, the EXPIRE, update 2.
	clk.Advance(time.Second)
	if err := recv("update 2"); err != nil {
		return err
	}
	cliSide.Close()
	if err := <-served; err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	return nil
}
