package dispatch

import (
	"io"

	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// Conn is one session's ordered control channel, as the dispatcher sees it.
// Recv is called from one goroutine, Send from another; Close is called
// once, when Serve ends, and must make a blocked Recv or Send return.
type Conn interface {
	// Recv returns the next client message; io.EOF at a clean end of the
	// input. A *framing.DecodeError leaves the stream usable.
	Recv() (*pb.ClientMessage, error)
	// Send writes one server message. Messages arrive in Send order.
	Send(*pb.ServerMessage) error
	Close() error
}

// EncodedSender is a Conn that can send a server message in its wire
// form (framing.Encoded) instead of as a message to marshal. Serve sends
// watch updates that way when its Conn is one: the part of an update that
// every watch of its event shares is encoded once, not once per watch. The
// Conns of NewStreamConn and of wstransport are EncodedSenders.
type EncodedSender interface {
	// SendEncoded writes one server message, like Send, whose bytes m
	// appends.
	SendEncoded(m framing.Encoded) error
}

// BatchSender is a Conn that can write several server messages, each in
// its wire form, with one write: the session's writer sends what queued up
// while it was busy (a commit's updates for the session's watches, answers
// behind them) at once, paying one system call and one wake-up of the peer
// for all of them. The Conns of NewStreamConn are BatchSenders.
type BatchSender interface {
	// SendBatch writes ms in order, as Send and SendEncoded one at a time
	// would; after an error, the messages before the failing one may have
	// been written, none after it.
	SendBatch(ms []framing.Encoded) error
}

// Releaser is a Conn whose Recv may return a message that refers to the
// Conn's own memory (wstransport decodes a PutState's document in place,
// in its read buffer): the session calls Release with each message Recv
// returned once it refers to it no more (the request was run and its
// answer built, or it was answered without running), and calls it once.
type Releaser interface {
	Release(*pb.ClientMessage)
}

// NewStreamConn returns the server side of the framing over rwc, rejecting
// client frames over maxFrameBytes (framing.DefaultMaxFrameBytes when <= 0).
func NewStreamConn(rwc io.ReadWriteCloser, maxFrameBytes int) Conn {
	return streamConn{framing.NewConn[*pb.ClientMessage, *pb.ServerMessage](rwc, maxFrameBytes, newClientMessage), rwc}
}

func newClientMessage() *pb.ClientMessage { return new(pb.ClientMessage) }

type streamConn struct {
	*framing.Conn[*pb.ClientMessage, *pb.ServerMessage]
	io.Closer
}
