package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// Names of the wire protocol's workloads.
const (
	nameWireCAS    = "wire_cas"
	nameWireFanout = "wire_fanout"
	// nameWireFanoutDecoded is wire_fanout with each update also decoded
	// into a ServerMessage by its client.
	nameWireFanoutDecoded = "wire_fanout_decoded"
)

// clientReadBuffer is the read buffer of a wire session's client.
const clientReadBuffer = 64 << 10

// wireSession is the client end of one dispatcher session over the
// framing on net.Pipe.
type wireSession struct {
	raw    net.Conn
	conn   *framing.Conn[*pb.ServerMessage, *pb.ClientMessage]
	served chan error
}

func dialWire(srv *dispatch.Server, p statestore.Principal) *wireSession {
	srvSide, cliSide := net.Pipe()
	// The client reads through a 64 KiB buffer: a batch of the session's
	// writer (all that queued for it: a commit's updates for its watches)
	// then takes one read of the pipe, not one per 4 KiB.
	rw := struct {
		io.Reader
		io.Writer
	}{bufio.NewReaderSize(cliSide, clientReadBuffer), cliSide}
	w := &wireSession{raw: cliSide, served: make(chan error, 1),
		conn: framing.NewConn[*pb.ServerMessage, *pb.ClientMessage](rw, 0, func() *pb.ServerMessage { return new(pb.ServerMessage) })}
	go func() { w.served <- srv.Serve(context.Background(), p, dispatch.NewStreamConn(srvSide, 0)) }()
	return w
}

func (w *wireSession) close() error {
	w.raw.Close()
	return <-w.served
}

// call sends m and returns the next message (for sessions without watches).
func (w *wireSession) call(m *pb.ClientMessage) (*pb.ServerMessage, error) {
	if err := w.conn.Send(m); err != nil {
		return nil, err
	}
	return w.conn.Recv()
}

// wireCAS is the client side of the wire_cas workload: each of the 127
// owners has its own session (dispatcher + framing over a pipe) and
// compare-and-sets its document in turn.
type wireCAS struct {
	owners   []*casOwner
	sessions []*wireSession
	id       uint64
}

func newWireCAS(srv *dispatch.Server) *wireCAS {
	c := &wireCAS{owners: newOwners(casKeys), sessions: make([]*wireSession, casKeys)}
	for i, o := range c.owners {
		c.sessions[i] = dialWire(srv, o.Principal)
	}
	return c
}

// op is the i-th compare-and-set, from the request's send to its answer's
// decode.
func (c *wireCAS) op(i int) error {
	o := c.owners[i%casKeys]
	c.id++
	// expected_revision 0 on the first round is create-only, as in cas.
	req := &pb.PutState{RequestId: c.id, Namespace: o.Namespace, Key: casKey, Schema: schema.MediaIntentV1, Document: o.Doc, ExpectedRevision: &o.Rev}
	m, err := c.sessions[i%casKeys].call(&pb.ClientMessage{Message: &pb.ClientMessage_PutState{PutState: req}})
	if err != nil {
		return err
	}
	res := m.GetResult()
	if res.GetRequestId() != c.id || res.GetEntry() == nil {
		return fmt.Errorf("request %d answered %v", c.id, m)
	}
	o.Rev = res.GetEntry().GetRevision()
	return nil
}

// close ends every session and returns the first failure.
func (c *wireCAS) close() error {
	var err error
	for _, w := range c.sessions {
		if cerr := w.close(); err == nil {
			err = cerr
		}
	}
	return err
}

const wireCASNote = "dispatcher+framing over net.Pipe, one session per owner"

// runWireCAS is durable_cas through the wire, on its own: the absolute
// row. targets_serial judges the target.
func runWireCAS(env *Env) ([]harness.Result, error) {
	s, err := openScratch(env, nameWireCAS, statestore.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	c := newWireCAS(dispatch.New(s, dispatch.Options{}))
	r, err := env.Run.Serial(nameWireCAS, env.Ops, c.op)
	if cerr := c.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	r.Writers = 1
	r.Note = fmt.Sprintf("owners=%d doc=%dB %s", casKeys, harness.DocBytes, wireCASNote)
	return []harness.Result{r}, nil
}

// runWireFanout is watch_fanout with every message encoded, framed and
// sent over a pipe to the session's client: 1,024 watches across 127
// sessions, 30 rounds of one matching write, timed from the write's call
// until every watch's update was read off its connection. The client
// reads each frame whole and tells an update by its first field (the
// ServerMessage's watch_update), as a client routing messages would
// before decoding them: the row is the store's side of the fan-out, which
// on this 2-processor machine would otherwise share the processors with
// 1,024 decodes of the 2,193-byte document. wire_fanout_decoded
// (runWireFanoutDecoded) decodes every message into a ServerMessage too.
// Nothing is acknowledged, so three more writes must close all 1,024 with
// BUFFER_OVERFLOW, which is verified (closures are decoded in both).
func runWireFanout(env *Env) ([]harness.Result, error) { return wireFanout(env, nameWireFanout, false) }

// runWireFanoutDecoded is wire_fanout with every update decoded by its
// client.
func runWireFanoutDecoded(env *Env) ([]harness.Result, error) {
	return wireFanout(env, nameWireFanoutDecoded, true)
}

// watchUpdateField is the ServerMessage field of a watch update, the first
// (and only) field of its frame.
var watchUpdateField = (&pb.ServerMessage{}).ProtoReflect().Descriptor().Fields().ByName("watch_update").Number()

// isWatchUpdate reports whether frame, a ServerMessage's encoding, holds a
// watch update: its first field is watch_update, a message.
func isWatchUpdate(frame []byte) bool {
	num, typ, n := protowire.ConsumeTag(frame)
	return n > 0 && num == watchUpdateField && typ == protowire.BytesType
}

func wireFanout(env *Env, name string, decode bool) ([]harness.Result, error) {
	s, err := openScratch(env, name, statestore.Options{NoSync: true, Limits: fanoutLimits})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	srv := dispatch.New(s, dispatch.Options{})
	const sessions, watches, rounds = fanoutSessions, fanoutWatches, fanoutRoundCount
	const ns = "service/fanout"
	admin := statestore.Principal{ID: "coordinator", Admin: true}
	clients := make([]*wireSession, sessions)
	for i := range clients {
		clients[i] = dialWire(srv, admin)
	}
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	for w := 0; w < watches; w++ {
		m, err := clients[w%sessions].call(&pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{
			RequestId: uint64(w + 1), WatchId: fmt.Sprintf("w%d", w), Namespace: ns, KeyPrefix: "intents/"}}})
		if err != nil {
			return nil, err
		}
		if m.GetResult().GetWatch() == nil {
			return nil, fmt.Errorf("watch %d answered %v", w, m)
		}
	}
	var updates, closed, target atomic.Int64
	reached := make(chan struct{}, 1)
	readErr := make(chan error, sessions)
	for _, c := range clients {
		go func() {
			for {
				frame, err := c.conn.RecvFrame()
				if err != nil {
					readErr <- err
					return
				}
				update := !decode && isWatchUpdate(frame)
				m := new(pb.ServerMessage)
				if !update {
					if err := proto.Unmarshal(frame, m); err != nil {
						readErr <- err
						return
					}
				}
				switch {
				case update || m.GetWatchUpdate() != nil:
					if updates.Add(1) == target.Load() {
						reached <- struct{}{}
					}
				case m.GetWatchClosed().GetReason() == pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_BUFFER_OVERFLOW:
					if closed.Add(1) == target.Load() {
						reached <- struct{}{}
					}
				}
			}
		}()
	}
	doc := testdoc.MediaIntent(harness.DocBytes, 1)
	ctx := context.Background()
	put := func() error {
		_, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: "intents/front-door", Schema: schema.MediaIntentV1, Document: doc})
		return err
	}
	wait := func(what string) error {
		select {
		case <-reached:
			return nil
		case err := <-readErr:
			return fmt.Errorf("%s: a session failed: %w", what, err)
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s: %d updates and %d closures decoded", what, updates.Load(), closed.Load())
		}
	}
	lat, err := fanoutRounds(env.Run, name, put, wait, &target, &updates)
	if err != nil {
		return nil, err
	}
	how := "each update encoded, framed and read whole"
	if decode {
		how = "each update encoded, framed, read and decoded"
	}
	r := harness.Result{Name: name, Writers: 1, Note: fmt.Sprintf("watches=%d sessions=%d rounds=%d, %s; %d closed with BUFFER_OVERFLOW at the 33rd", watches, sessions, rounds, how, closed.Load())}
	lat.Fill(&r)
	return []harness.Result{r}, nil
}
