package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// The in-process fan-out, three ways at once: the specification's 1,024
// watches over 127 sessions and 30 rounds of one matching write (a store
// each, the journal unsynced: the round is the fan-out, not the disk),
// the rounds alternating between the three, the order rotated every
// round, so that their ratios are their own and not the machine's drift
// between rows. One sample per write: from its call until the last of the
// 1,024 watchers holds its update (fanoutSide, as network_fanout).
//
//   - watch_fanout.alt: the watch registry alone, each update handed to a
//     sink that records it (the specification's measurement);
//   - wire_fanout.alt: the same over the wire protocol: every update
//     encoded (the commit's shared part once), framed, queued, written
//     over a net.Pipe per session by its writer (what queued up while it
//     was busy in one write) and read whole by the session's client,
//     which takes the watch and revision from the frame's first fields;
//   - pipe_fanout_floor.alt: the transport alone, the floor under
//     wire_fanout: frames of the update's size made ready in advance,
//     each session's batch written by a goroutine of its own over the same
//     net.Pipe and reader when the round starts. What wire_fanout takes
//     over it is the protocol's: the registry, the encoding, the queues.
const (
	nameInProcessFanout = "inprocess_fanout"
	namePipeFanoutFloor = "pipe_fanout_floor"
)

func runInProcessFanout(env *Env) ([]harness.Result, error) {
	return inProcessFanout(env, fullFanout)
}

func inProcessFanout(env *Env, size fanoutSize) ([]harness.Result, error) {
	return alternateFanouts(env, size, []fanoutOpen{openRegistryFanout, openWireFanout, openPipeFanoutFloor}, report.Alternating, "fan-outs")
}

// fanoutWatchID is watcher w's watch ID, and watcherOf its inverse.
func fanoutWatchID(w int) string { return "w" + strconv.Itoa(w) }

func watcherOf(id []byte) (int, error) {
	if len(id) < 2 || id[0] != 'w' {
		return 0, fmt.Errorf("watch ID %q is not one of the fan-out's", id)
	}
	return strconv.Atoi(string(id[1:]))
}

// fanoutStore opens a store of the in-process fan-out and its writer's put.
func fanoutStore(env *Env, name string) (*statestore.Store, func() (uint64, error), error) {
	s, err := openScratch(env, name, statestore.Options{NoSync: true, Limits: fanoutLimits})
	if err != nil {
		return nil, nil, err
	}
	doc := testdoc.MediaIntent(harness.DocBytes, 1)
	put := func() (uint64, error) {
		e, err := s.Put(context.Background(), statestore.Principal{ID: "coordinator", Admin: true},
			statestore.PutRequest{Namespace: wsFanoutNS, Key: wsFanoutKey, Schema: schema.MediaIntentV1, Document: doc})
		return e.Revision, err
	}
	return s, put, nil
}

// probeSink records each update of a registry session in the probe.
type probeSink struct{ p *fanoutProbe }

func (k probeSink) Deliver(m watch.Message) error {
	if u, ok := m.(*watch.Update); ok {
		w, err := watcherOf([]byte(u.WatchID))
		if err != nil {
			k.p.fail(err)
			return nil
		}
		k.p.got(w, u.Revision)
	}
	return nil
}

// openRegistryFanout is watch_fanout as a side of inprocess_fanout.
func openRegistryFanout(env *Env, size fanoutSize) (*fanoutSide, func() error, error) {
	s, put, err := fanoutStore(env, nameWatchFanout)
	if err != nil {
		return nil, nil, err
	}
	p := newFanoutProbe(size)
	admin := statestore.Principal{ID: "coordinator", Admin: true}
	var ss []*statestore.Session
	for range size.conns {
		sess, err := s.OpenSession(admin, probeSink{p})
		if err != nil {
			return nil, nil, errors.Join(err, s.Close())
		}
		ss = append(ss, sess)
	}
	for w := range size.watchers {
		if _, err := s.Watch(context.Background(), ss[w%size.conns], statestore.WatchRequest{WatchID: fanoutWatchID(w), Namespace: wsFanoutNS, KeyPrefix: wsFanoutKey}); err != nil {
			return nil, nil, errors.Join(err, s.Close())
		}
	}
	return newFanoutSide(nameWatchFanout, "the watch registry, each update handed to a sink", p, put), s.Close, nil
}

// updateHeader returns the watch ID and revision of frame, a ServerMessage
// holding a watch update, reading no further than those fields; ok is
// false for any other message.
func updateHeader(frame []byte) (id []byte, rev uint64, ok bool) {
	num, typ, n := protowire.ConsumeTag(frame)
	if n < 0 || num != watchUpdateField || typ != protowire.BytesType {
		return nil, 0, false
	}
	u, n := protowire.ConsumeBytes(frame[n:])
	if n < 0 {
		return nil, 0, false
	}
	for len(u) > 0 && (id == nil || rev == 0) {
		num, typ, n := protowire.ConsumeTag(u)
		if n < 0 {
			return nil, 0, false
		}
		u = u[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			id, n = protowire.ConsumeBytes(u)
		case num == 3 && typ == protowire.VarintType:
			rev, n = protowire.ConsumeVarint(u)
		default:
			n = protowire.ConsumeFieldValue(num, typ, u)
		}
		if n < 0 {
			return nil, 0, false
		}
		u = u[n:]
	}
	return id, rev, id != nil && rev != 0
}

// openWireFanout is wire_fanout as a side of inprocess_fanout.
func openWireFanout(env *Env, size fanoutSize) (_ *fanoutSide, _ func() error, err error) {
	s, put, err := fanoutStore(env, nameWireFanout)
	if err != nil {
		return nil, nil, err
	}
	srv := dispatch.New(s, dispatch.Options{})
	admin := statestore.Principal{ID: "coordinator", Admin: true}
	var sessions []*wireSession
	closeAll := func() error {
		var errs []error
		for _, c := range sessions {
			if err := c.close(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				errs = append(errs, err)
			}
		}
		return errors.Join(append(errs, s.Close())...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, closeAll())
		}
	}()
	for range size.conns {
		sessions = append(sessions, dialWire(srv, admin))
	}
	for w := range size.watchers {
		m, err := sessions[w%size.conns].call(&pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{
			RequestId: uint64(w + 1), WatchId: fanoutWatchID(w), Namespace: wsFanoutNS, KeyPrefix: wsFanoutKey}}})
		if err != nil {
			return nil, nil, err
		}
		if m.GetResult().GetWatch() == nil {
			return nil, nil, fmt.Errorf("%s: watch %d answered %v", nameWireFanout, w, m)
		}
	}
	p := newFanoutProbe(size)
	for _, c := range sessions {
		go func() {
			for {
				frame, err := c.conn.RecvFrame()
				if err != nil {
					return // the session ended: the side is closing
				}
				id, rev, ok := updateHeader(frame)
				if !ok {
					p.fail(fmt.Errorf("%s: a %d-byte frame is not a watch update", nameWireFanout, len(frame)))
					continue
				}
				w, err := watcherOf(id)
				if err != nil {
					p.fail(err)
					continue
				}
				p.got(w, rev)
			}
		}()
	}
	return newFanoutSide(nameWireFanout, "the wire protocol over net.Pipe, each update read whole by its session's client", p, put), closeAll, nil
}

// openPipeFanoutFloor is pipe_fanout_floor: the transport of wire_fanout
// with no protocol. Session c's batch is the frames of its watchers (c,
// c+conns, ...), each the size of a real update's frame, made once; a
// round is one revision, handed to every session's writer, which writes
// its batch with one Write, and each session's reader credits the k-th
// frame of a batch to its k-th watcher.
func openPipeFanoutFloor(env *Env, size fanoutSize) (*fanoutSide, func() error, error) {
	frameBytes, err := updateFrameSize()
	if err != nil {
		return nil, nil, err
	}
	p := newFanoutProbe(size)
	var rev atomic.Uint64
	var raws []net.Conn
	var kicks []chan struct{}
	for c := range size.conns {
		watchers := (size.watchers - c + size.conns - 1) / size.conns
		var batch []byte
		payload := make([]byte, frameBytes-protowire.SizeVarint(uint64(frameBytes)))
		for range watchers {
			batch = protowire.AppendVarint(batch, uint64(len(payload)))
			batch = append(batch, payload...)
		}
		srvSide, cliSide := net.Pipe()
		raws = append(raws, srvSide, cliSide)
		kick := make(chan struct{}, 1)
		kicks = append(kicks, kick)
		go func() {
			for range kick {
				if _, err := srvSide.Write(batch); err != nil {
					return
				}
			}
		}()
		go func() {
			rd := framing.NewReader(bufio.NewReaderSize(cliSide, clientReadBuffer), 0)
			for k := 0; ; k = (k + 1) % watchers {
				if _, err := rd.ReadFrame(); err != nil {
					return
				}
				p.got(c+k*size.conns, rev.Load())
			}
		}()
	}
	put := func() (uint64, error) {
		r := rev.Add(1)
		for _, k := range kicks {
			k <- struct{}{}
		}
		return r, nil
	}
	closeAll := func() error {
		for _, k := range kicks {
			close(k)
		}
		for _, c := range raws {
			c.Close()
		}
		return nil
	}
	how := fmt.Sprintf("%d-byte frames made in advance, one write per session's batch over net.Pipe, read whole", frameBytes)
	return newFanoutSide(namePipeFanoutFloor, how, p, put), closeAll, nil
}

// updateFrameSize is the length of the frame of the fan-out's watch update
// (its length prefix included), as the dispatcher sends it.
func updateFrameSize() (int, error) {
	doc := testdoc.MediaIntent(harness.DocBytes, 1)
	m := &pb.ServerMessage{Message: &pb.ServerMessage_WatchUpdate{WatchUpdate: &pb.StateStoreWatchUpdate{
		WatchId: fanoutWatchID(fanoutWatches - 1), WatchSequence: fanoutRoundCount, Revision: fanoutRoundCount + 1,
		Kind: pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_PUT,
		Entry: &pb.StateEntry{Namespace: wsFanoutNS, Key: wsFanoutKey, Schema: schema.MediaIntentV1, Owner: "coordinator",
			Revision: fanoutRoundCount + 1, Document: doc, CreatedAtMs: 1_750_000_000_000, UpdatedAtMs: 1_750_000_000_000}}}}
	b, err := framing.AppendFrame(nil, m)
	return len(b), err
}
