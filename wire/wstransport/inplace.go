package wstransport

import (
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/keeppeek/statestore/internal/wsconn"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// Field numbers of state_store.proto that decodePutInPlace depends on. A
// renumbering there fails TestPutInPlaceFieldNumbers, which reads them
// from the generated descriptors.
const (
	fieldClientPutState protowire.Number = 2 // ClientMessage.put_state
	fieldPutRequestID   protowire.Number = 1
	fieldPutNamespace   protowire.Number = 2
	fieldPutKey         protowire.Number = 3
	fieldPutSchema      protowire.Number = 4
	fieldPutDocument    protowire.Number = 5
	fieldPutExpected    protowire.Number = 6
	fieldPutTTL         protowire.Number = 7
	lastPutField                         = fieldPutTTL
)

// inPlace is a ClientMessage carrying a PutState whose document is not
// copied out of the message's read buffer: the protobuf decoder copies
// every bytes field, and the store copies the document again for itself,
// so a PutState's 2 KiB document was copied twice on its way in. The
// messages and the buffer stay the session's until the dispatcher has run
// and answered the request (dispatch.Releaser), then go back to their pools.
type inPlace struct {
	msg      pb.ClientMessage
	oneof    pb.ClientMessage_PutState
	put      pb.PutState
	expected uint64
	buf      *[]byte // holds the document
}

var inPlaces = sync.Pool{New: func() any { return new(inPlace) }}

// decodePutInPlace decodes data as proto.Unmarshal would into a
// ClientMessage, when data is one put_state and nothing else, each
// PutState field at most once with its own wire type and its strings
// UTF-8 (what a client's encoder writes): the document then refers to
// data. It reports false for anything else, which proto.Unmarshal then
// decodes (or refuses) as before, and leaves put in a state to be reset.
func decodePutInPlace(data []byte, ip *inPlace) bool {
	num, typ, n := protowire.ConsumeTag(data)
	if n < 0 || num != fieldClientPutState || typ != protowire.BytesType {
		return false
	}
	body, m := protowire.ConsumeBytes(data[n:])
	if m < 0 || n+m != len(data) {
		return false
	}
	put := &ip.put
	var seen uint8
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 || num < 1 || num > lastPutField || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		body = body[n:]
		switch num {
		case fieldPutRequestID, fieldPutExpected, fieldPutTTL:
			if typ != protowire.VarintType {
				return false
			}
			v, n := protowire.ConsumeVarint(body)
			if n < 0 {
				return false
			}
			body = body[n:]
			switch num {
			case fieldPutRequestID:
				put.RequestId = v
			case fieldPutExpected:
				ip.expected = v
				put.ExpectedRevision = &ip.expected
			default:
				put.TtlMs = v
			}
		default:
			if typ != protowire.BytesType {
				return false
			}
			v, n := protowire.ConsumeBytes(body)
			if n < 0 {
				return false
			}
			body = body[n:]
			if num == fieldPutDocument {
				if len(v) > 0 { // proto.Unmarshal leaves an empty document nil
					put.Document = v[:len(v):len(v)]
				}
				continue
			}
			if !utf8.Valid(v) {
				return false // proto.Unmarshal refuses it, naming the field
			}
			switch num {
			case fieldPutNamespace:
				put.Namespace = string(v)
			case fieldPutKey:
				put.Key = string(v)
			default:
				put.Schema = string(v)
			}
		}
	}
	ip.oneof.PutState = put
	ip.msg.Message = &ip.oneof
	return true
}

// reset clears what ip refers to, for the pool.
func (ip *inPlace) reset() {
	ip.msg.Message, ip.oneof.PutState = nil, nil
	p := &ip.put
	p.RequestId, p.Namespace, p.Key, p.Schema, p.Document, p.ExpectedRevision, p.TtlMs = 0, "", "", "", nil, nil, 0
	ip.expected, ip.buf = 0, nil
}

// inPlaces of one connection: the messages Recv decoded in place that the
// dispatcher has not released yet.
type heldMessages struct {
	mu   sync.Mutex
	held map[*pb.ClientMessage]*inPlace
}

// decode returns data's ClientMessage decoded in place, holding bp, or
// false (bp is then still the caller's).
func (h *heldMessages) decode(data []byte, bp *[]byte) (*pb.ClientMessage, bool) {
	ip := inPlaces.Get().(*inPlace)
	if !decodePutInPlace(data, ip) {
		ip.reset()
		inPlaces.Put(ip)
		return nil, false
	}
	ip.buf = bp
	h.mu.Lock()
	if h.held == nil {
		h.held = make(map[*pb.ClientMessage]*inPlace)
	}
	h.held[&ip.msg] = ip
	h.mu.Unlock()
	return &ip.msg, true
}

// release gives back m's buffer and messages if Recv decoded it in place;
// nothing refers to them any more.
func (h *heldMessages) release(m *pb.ClientMessage) {
	h.mu.Lock()
	ip := h.held[m]
	delete(h.held, m)
	h.mu.Unlock()
	if ip == nil {
		return
	}
	wsconn.PutBuffer(ip.buf)
	ip.reset()
	inPlaces.Put(ip)
}
