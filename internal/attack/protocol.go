package attack

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// defaultMaxMessageBytes is the server's message bound (wstransport's
// default, the protocol's frame bound).
const defaultMaxMessageBytes = framing.DefaultMaxFrameBytes

// rawSession upgrades a raw connection as principal id.
func rawSession(ctx context.Context, e *Env, id string) (*RawConn, error) {
	c, err := DialRaw(ctx, e.S.Addr, 0)
	if err != nil {
		return nil, err
	}
	if err := c.Upgrade("127.0.0.1", UpgradeHeader(e.S.Token(id))); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// result reads the next message of c, which must be a result.
func result(c *RawConn) (*pb.StateStoreResult, error) {
	m, err := c.Recv(HangGuard)
	if err != nil {
		return nil, err
	}
	if m.GetResult() == nil {
		return nil, fmt.Errorf("answered %v, want a StateStoreResult", m)
	}
	return m.GetResult(), nil
}

// malformed is the protocol-input attack: garbage, text, a message that
// is no request, request_id 0, unknown fields, a reused request_id while
// the first is in flight, and a message over the bound. Each gets the
// documented answer (package dispatch's "Bad input" table) and, but for
// the oversized one, the session goes on.
func malformed(ctx context.Context, e *Env) error {
	c, err := rawSession(ctx, e, Alice)
	if err != nil {
		return err
	}
	defer c.Close()
	noRequest := protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "no request here")
	get, _ := proto.Marshal(GetMsg(5, "user/"+Alice, "k"))
	inner, _ := proto.Marshal(GetMsg(6, "user/"+Alice, "k").GetGetState())
	inner = protowire.AppendString(protowire.AppendTag(inner, 50, protowire.BytesType), "unknown")
	unknown := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), inner)
	unknown = protowire.AppendVarint(protowire.AppendTag(unknown, 77, protowire.VarintType), 1)
	zero, _ := proto.Marshal(GetMsg(0, "user/"+Alice, "k"))
	cases := []struct {
		name  string
		op    byte
		frame []byte
		id    uint64 // the answer's request_id
		code  statestore.Code
		field string
	}{
		{"garbage bytes", OpBinary, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0, statestore.InvalidArgument, "frame"},
		{"a truncated message", OpBinary, get[:len(get)-3], 0, statestore.InvalidArgument, "frame"},
		{"a text message", OpText, []byte(`{"get_state":{"request_id":1}}`), 0, statestore.InvalidArgument, "frame"},
		{"a message that is no request", OpBinary, noRequest, 0, statestore.InvalidArgument, "message"},
		{"an empty message", OpBinary, nil, 0, statestore.InvalidArgument, "message"},
		{"request_id 0", OpBinary, zero, 0, statestore.InvalidArgument, "request_id"},
		{"unknown fields (ignored)", OpBinary, unknown, 6, statestore.NotFound, "key"},
		{"after all that, a plain get", OpBinary, get, 5, statestore.NotFound, "key"},
	}
	var errs []error
	for _, tc := range cases {
		if err := c.WriteFrame(tc.op, tc.frame); err != nil {
			return fmt.Errorf("%s: %w", tc.name, err)
		}
		r, err := result(c)
		if err != nil {
			return fmt.Errorf("%s: %w", tc.name, err)
		}
		if err := WantError(r, tc.id, tc.code, tc.field, ""); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", tc.name, err))
		}
	}
	errs = append(errs, reusedRequestID(c, e))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Over the bound: closed 1009, the session ends.
	big := PutMsg(9, "user/"+Alice, "big", testdoc.MediaIntent(defaultMaxMessageBytes+1, 1))
	if err := c.Send(big); err != nil && !isReset(err) {
		return err
	}
	cf, err := c.AwaitClosed(HangGuard, true)
	if err != nil || cf == nil || cf.Status != StatusMessageTooBig {
		return fmt.Errorf("a %d-byte message (bound %d): closed %v (%v), want 1009", proto.Size(big), defaultMaxMessageBytes, cf, err)
	}
	e.Record("oversized message", "%d bytes closed %d %q", proto.Size(big), cf.Status, cf.Reason)
	e.Record("malformed inputs answered", "%d", len(cases)+1)
	return nil
}

// reusedRequestID holds a PutState in its fdatasync (the store's fault
// seam; the bystander's writes wait behind it for as long as the attack
// takes to read one answer), sends a GetState with the same request_id:
// that one is refused naming request_id and the id, and the put is
// answered once the sync returns.
func reusedRequestID(c *RawConn, e *Env) error {
	entered, release, restore := e.S.Faults.StallNextSync()
	defer restore()
	defer release()
	if err := c.Send(PutMsg(7, "user/"+Alice, "k", testdoc.MediaIntent(300, 7))); err != nil {
		return err
	}
	<-entered
	if err := c.Send(GetMsg(7, "user/"+Alice, "k")); err != nil {
		return err
	}
	r, err := result(c)
	if err != nil {
		return err
	}
	if err := WantError(r, 0, statestore.InvalidArgument, "request_id", "7"); err != nil {
		return fmt.Errorf("a request_id reused while in flight: %w", err)
	}
	refusal := r.GetError().GetMessage()
	release()
	r, err = result(c)
	if err != nil {
		return err
	}
	if r.GetRequestId() != 7 || r.GetEntry() == nil || r.GetEntry().GetKey() != "k" {
		return fmt.Errorf("the first request 7 was answered %v, want its entry", r)
	}
	// Answered, the id is free again.
	if err := c.Send(GetMsg(7, "user/"+Alice, "k")); err != nil {
		return err
	}
	if r, err = result(c); err != nil || r.GetRequestId() != 7 || r.GetEntry() == nil {
		return fmt.Errorf("request_id 7 reused after its answer: %v %v, want the entry", r, err)
	}
	e.Record("reused request_id", "refused while in flight (%q), served after its answer", refusal)
	return nil
}
