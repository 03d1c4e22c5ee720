package framing

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

type rw struct {
	io.Reader
	io.Writer
}

func getState(id uint64) *pb.ClientMessage {
	return &pb.ClientMessage{Message: &pb.ClientMessage_GetState{GetState: &pb.GetState{RequestId: id, Namespace: "user/alice", Key: "k"}}}
}

func frame(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := AppendFrame(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTripInOrder(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	out := NewConn[*pb.ServerMessage, *pb.ClientMessage](rw{&buf, &buf}, 0, func() *pb.ServerMessage { return new(pb.ServerMessage) })
	for id := uint64(1); id <= 3; id++ {
		if err := out.Send(getState(id)); err != nil {
			t.Fatal(err)
		}
	}
	in := NewConn[*pb.ClientMessage, *pb.ServerMessage](rw{&buf, io.Discard}, 0, func() *pb.ClientMessage { return new(pb.ClientMessage) })
	for id := uint64(1); id <= 3; id++ {
		m, err := in.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(m, getState(id)) {
			t.Fatalf("frame %d decoded as %v", id, m)
		}
	}
	if _, err := in.Recv(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// failAfter fails the test's stream if more than n bytes are read from it.
type failAfter struct {
	r io.Reader
	n int
}

func (f *failAfter) Read(p []byte) (int, error) {
	if len(p) > f.n {
		p = p[:f.n]
	}
	if len(p) == 0 {
		return 0, errors.New("read past the length prefix")
	}
	k, err := f.r.Read(p)
	f.n -= k
	return k, err
}

func TestReadFrameErrors(t *testing.T) {
	t.Parallel()
	good := frame(t, getState(1))
	tests := []struct {
		name  string
		input []byte
		max   int
		check func(error) bool
	}{
		{"clean end", nil, 0, func(err error) bool { return err == io.EOF }},
		{"prefix cut", []byte{0x80}, 0, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"payload cut", good[:len(good)-1], 0, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"eleven-byte prefix", bytes.Repeat([]byte{0x80}, 11), 0, func(err error) bool { return errors.Is(err, ErrBadPrefix) }},
		{"prefix over 64 bits", append(bytes.Repeat([]byte{0xff}, 9), 0x02), 0, func(err error) bool { return errors.Is(err, ErrBadPrefix) }},
		{"over the maximum", good, len(good) - 2, func(err error) bool {
			var fe *FrameSizeError
			return errors.As(err, &fe) && fe.Size == uint64(len(good)-1) && fe.Max == len(good)-2
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewReader(bytes.NewReader(tc.input), tc.max).ReadFrame()
			if !tc.check(err) {
				t.Fatalf("ReadFrame: %v", err)
			}
		})
	}
}

// TestFramesAroundTheReadBufferSize reads frames smaller than, equal to and
// larger than the read buffer, back to back, through streams that deliver
// them whole, in halves and a byte at a time: a frame returned in place
// from the buffer and one copied out both come back intact, and each is
// skipped exactly once before the next.
func TestFramesAroundTheReadBufferSize(t *testing.T) {
	t.Parallel()
	sizes := []int{0, 1, 127, 128, 2293, 4093, 4094, 4095, 4096, 4097, 9000, 2293, 0, 70000, 5}
	var stream []byte
	for i, n := range sizes {
		stream = protowire.AppendVarint(stream, uint64(n))
		stream = append(stream, bytes.Repeat([]byte{byte(i + 1)}, n)...)
	}
	for _, tc := range []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"halves", iotest.HalfReader},
		{"bytes", iotest.OneByteReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rd := NewReader(tc.wrap(bytes.NewReader(stream)), 0)
			for i, n := range sizes {
				b, err := rd.ReadFrame()
				if err != nil {
					t.Fatalf("frame %d (%d bytes): %v", i, n, err)
				}
				if !bytes.Equal(b, bytes.Repeat([]byte{byte(i + 1)}, n)) {
					t.Fatalf("frame %d: got %d bytes, want %d bytes of %d", i, len(b), n, i+1)
				}
			}
			if _, err := rd.ReadFrame(); err != io.EOF {
				t.Fatalf("after the last frame: %v, want io.EOF", err)
			}
		})
	}
}

func TestOversizedFrameIsRejectedBeforeItsPayloadIsRead(t *testing.T) {
	t.Parallel()
	// A prefix announcing 1 GiB, then a stream that fails any further read.
	prefix := []byte{0x80, 0x80, 0x80, 0x80, 0x04}
	src := io.MultiReader(bytes.NewReader(prefix), bytes.NewReader(make([]byte, 1<<20)))
	_, err := NewReader(&failAfter{r: src, n: len(prefix)}, 1024).ReadFrame()
	var fe *FrameSizeError
	if !errors.As(err, &fe) || fe.Size != 1<<30 {
		t.Fatalf("ReadFrame: %v, want a FrameSizeError for 1 GiB", err)
	}
}

func TestUndecodableFrameKeepsTheStreamInStep(t *testing.T) {
	t.Parallel()
	var in bytes.Buffer
	in.Write([]byte{3, 0xff, 0xff, 0xff}) // field 0xff... is no valid tag
	in.Write(frame(t, getState(9)))
	c := NewConn[*pb.ClientMessage, *pb.ServerMessage](rw{&in, io.Discard}, 0, func() *pb.ClientMessage { return new(pb.ClientMessage) })
	_, err := c.Recv()
	var de *DecodeError
	if !errors.As(err, &de) || de.Size != 3 {
		t.Fatalf("first Recv: %v, want a DecodeError of 3 bytes", err)
	}
	m, err := c.Recv()
	if err != nil || !proto.Equal(m, getState(9)) {
		t.Fatalf("second Recv: %v %v, want the next frame", m, err)
	}
}

// TestConcurrentSendsDoNotInterleave sends from many goroutines and checks
// every frame decodes whole.
func TestConcurrentSendsDoNotInterleave(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		// Split each write in two, as a stream may: only whole-frame
		// writes under Send's lock keep frames apart.
		buf.Write(p[:len(p)/2])
		buf.Write(p[len(p)/2:])
		return len(p), nil
	})
	out := NewConn[*pb.ServerMessage, *pb.ClientMessage](rw{nil, w}, 0, nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := out.Send(getState(uint64(g*1000 + i + 1))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	in := NewConn[*pb.ClientMessage, *pb.ServerMessage](rw{&buf, nil}, 0, func() *pb.ClientMessage { return new(pb.ClientMessage) })
	seen := map[uint64]bool{}
	for {
		m, err := in.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[m.GetGetState().GetRequestId()] = true
	}
	if len(seen) != 400 {
		t.Fatalf("%d distinct frames decoded, want 400", len(seen))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// preEncoded is an Encoded holding its bytes, with an optional lie about
// their length or a failure.
type preEncoded struct {
	b    []byte
	size int
	err  error
}

func (p preEncoded) Size() int { return p.size }

func (p preEncoded) AppendTo(b []byte) ([]byte, error) {
	if p.err != nil {
		return b, p.err
	}
	return append(b, p.b...), nil
}

// TestSendEncodedIsSend: a message sent in its wire form is the same
// frame Send writes, and an Encoded that fails or appends another length
// than its Size writes nothing.
func TestSendEncodedIsSend(t *testing.T) {
	t.Parallel()
	m := getState(7)
	enc, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var sent, encoded bytes.Buffer
	if err := NewConn[*pb.ServerMessage, *pb.ClientMessage](rw{nil, &sent}, 0, nil).Send(m); err != nil {
		t.Fatal(err)
	}
	c := NewConn[*pb.ServerMessage, *pb.ClientMessage](rw{nil, &encoded}, 0, nil)
	if err := c.SendEncoded(preEncoded{b: enc, size: len(enc)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sent.Bytes(), encoded.Bytes()) {
		t.Fatalf("SendEncoded wrote %x, Send %x", encoded.Bytes(), sent.Bytes())
	}
	encoded.Reset()
	var se *EncodedSizeError
	if err := c.SendEncoded(preEncoded{b: enc, size: len(enc) + 1}); !errors.As(err, &se) || se.Size != len(enc)+1 || se.Wrote != len(enc) {
		t.Errorf("a size that lies: %v", err)
	}
	boom := errors.New("boom")
	if err := c.SendEncoded(preEncoded{size: 3, err: boom}); !errors.Is(err, boom) {
		t.Errorf("a failing AppendTo: %v", err)
	}
	if encoded.Len() != 0 {
		t.Errorf("failed sends wrote %x", encoded.Bytes())
	}
}

// countingWriter records each Write.
type countingWriter struct{ writes [][]byte }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

// TestSendBatchIsOneWriteOfTheFrames: a batch is the frames Send would
// write one by one, in order, with one Write; a message that fails to
// encode ends the batch there, the frames before it still written and
// none after it.
func TestSendBatchIsOneWriteOfTheFrames(t *testing.T) {
	t.Parallel()
	enc, err := proto.Marshal(getState(2))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	one := NewConn[*pb.ServerMessage, *pb.ClientMessage](rw{nil, &want}, 0, nil)
	for id := uint64(1); id <= 3; id++ {
		if err := one.Send(getState(id)); err != nil {
			t.Fatal(err)
		}
	}
	var w countingWriter
	c := NewConn[*pb.ServerMessage, *pb.ClientMessage](rw{nil, &w}, 0, nil)
	if err := c.SendBatch([]Encoded{Message(getState(1)), preEncoded{b: enc, size: len(enc)}, Message(getState(3))}); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 1 || !bytes.Equal(w.writes[0], want.Bytes()) {
		t.Fatalf("SendBatch made %d writes %x; want one write %x", len(w.writes), w.writes, want.Bytes())
	}
	if err := c.SendBatch(nil); err != nil || len(w.writes) != 1 {
		t.Fatalf("an empty batch: %v, %d writes", err, len(w.writes))
	}
	boom := errors.New("boom")
	w.writes = nil
	err = c.SendBatch([]Encoded{Message(getState(1)), preEncoded{size: 3, err: boom}, Message(getState(3))})
	if !errors.Is(err, boom) {
		t.Fatalf("a failing message in the batch: %v", err)
	}
	if first := frame(t, getState(1)); len(w.writes) != 1 || !bytes.Equal(w.writes[0], first) {
		t.Fatalf("the batch failing at its second message wrote %x; want the first frame %x alone", w.writes, first)
	}
	w.writes = nil
	if err := c.SendBatch([]Encoded{preEncoded{size: 3, err: boom}}); !errors.Is(err, boom) || len(w.writes) != 0 {
		t.Fatalf("a batch failing at its first message: %v, wrote %x", err, w.writes)
	}
}
