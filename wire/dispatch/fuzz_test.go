package dispatch_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/fuzzcorpus"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// halfClosed is a session's stream whose input is a fixed byte string and
// whose output is collected: the input ends (EOF) while answers can still
// be written, as when a client half-closes.
type halfClosed struct {
	in     io.Reader
	mu     sync.Mutex
	out    bytes.Buffer
	closed bool
}

func (h *halfClosed) Read(p []byte) (int, error) { return h.in.Read(p) }

func (h *halfClosed) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0, io.ErrClosedPipe
	}
	return h.out.Write(p)
}

func (h *halfClosed) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return nil
}

// FuzzDispatch feeds arbitrary bytes, as the whole input of a session, into
// a live dispatcher on one store shared by all inputs. It requires: Serve
// returns (no hang), nothing panics, every output frame is a ServerMessage
// with its oneofs set and error codes specified, and no request_id is
// answered more often than the input carried it.
func FuzzDispatch(f *testing.F) {
	s, err := statestore.Open(statestore.Options{Dir: f.TempDir(), NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	srv := dispatch.New(s, dispatch.Options{})
	f.Fuzz(func(t *testing.T, input []byte) {
		t.Parallel()
		sent := requestIDs(input)
		h := &halfClosed{in: bytes.NewReader(input)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.Serve(context.Background(), statestore.Principal{ID: "alice"}, dispatch.NewStreamConn(h, 4096))
		}()
		select {
		case <-done:
		case <-time.After(hangGuard):
			t.Fatal("Serve did not return after its input ended")
		}
		answered := map[uint64]int{}
		rd := framing.NewReader(bytes.NewReader(h.out.Bytes()), 0)
		for {
			b, err := rd.ReadFrame()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("output frame: %v", err)
			}
			var m pb.ServerMessage
			if err := proto.Unmarshal(b, &m); err != nil {
				t.Fatalf("output is not a ServerMessage: %v", err)
			}
			switch x := m.GetMessage().(type) {
			case *pb.ServerMessage_Result:
				r := x.Result
				if r.GetResult() == nil {
					t.Fatalf("result without a result: %v", &m)
				}
				if e := r.GetError(); e != nil && (e.GetCode() == pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_UNSPECIFIED || e.GetField() == "") {
					t.Fatalf("error without a code or field: %v", &m)
				}
				if r.GetRequestId() != 0 {
					answered[r.GetRequestId()]++
				}
			case *pb.ServerMessage_AckResult:
				answered[x.AckResult.GetRequestId()]++
			case *pb.ServerMessage_WatchUpdate:
				if x.WatchUpdate.GetKind() == pb.StateStoreWatchUpdateKind_STATE_STORE_WATCH_UPDATE_KIND_UNSPECIFIED || x.WatchUpdate.GetWatchSequence() == 0 {
					t.Fatalf("malformed update: %v", &m)
				}
			case *pb.ServerMessage_WatchClosed:
				if x.WatchClosed.GetReason() == pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_UNSPECIFIED {
					t.Fatalf("closure without a reason: %v", &m)
				}
			default:
				t.Fatalf("empty ServerMessage")
			}
		}
		for id, n := range answered {
			if n > sent[id] {
				t.Fatalf("request_id %d answered %d times, sent %d times", id, n, sent[id])
			}
		}
		// Every request sent is answered with its id at least once (a copy
		// sent while the first was in flight is answered with id 0).
		for id := range sent {
			if answered[id] == 0 {
				t.Fatalf("request_id %d was never answered", id)
			}
		}
	})
}

// fuzzSeeds are the seed inputs checked in under testdata/fuzz/FuzzDispatch:
// a session using every request, and each kind of bad input.
func fuzzSeeds(tb testing.TB) map[string][]byte {
	frames := func(ms ...*pb.ClientMessage) []byte {
		var b []byte
		for _, m := range ms {
			var err error
			if b, err = framing.AppendFrame(b, m); err != nil {
				tb.Fatal(err)
			}
		}
		return b
	}
	session := frames(putReq(1, "user/alice", "k", doc("a"), nil, 0), putReq(2, "user/alice", "lease", doc("a"), rev(0), 1000),
		getReq(3, "user/alice", "k"), watchReq(4, "w", "user/alice", ""), putReq(5, "user/alice", "k", doc("b"), rev(1), 0),
		ackReq(6, "w", 1), unwatchReq(7, "w"), deleteReq(8, "user/alice", "k", rev(3)))
	return map[string][]byte{
		"session":            session,
		"duplicate-ids":      frames(putReq(9, "user/alice", "k", doc("a"), nil, 0), putReq(9, "user/alice", "k", doc("a"), nil, 0), getReq(9, "user/alice", "k")),
		"request-id-0":       frames(getReq(0, "user/alice", "k"), watchReq(0, "w", "user/alice", "")),
		"empty-oneof":        frames(&pb.ClientMessage{}),
		"not-a-message":      append(rawFrame([]byte{0xff, 0xff, 0xff}), session...),
		"oversized-frame":    append(rawFrame(make([]byte, 4097)), session...),
		"bad-prefix":         append(session, bytes.Repeat([]byte{0xff}, 11)...),
		"cut-inside-a-frame": session[:len(session)-3],
		"watch-too-many":     frames(watchReq(1, "a", "user/alice", ""), watchReq(2, "a", "user/alice", ""), watchReq(3, "b", "user/bob", ""), ackReq(4, "a", 99)),
	}
}

// TestSeedCorpus keeps testdata/fuzz/FuzzDispatch/seed-* in step with
// fuzzSeeds; -update rewrites them.
func TestSeedCorpus(t *testing.T) {
	t.Parallel()
	for name, input := range fuzzSeeds(t) {
		path := filepath.Join("testdata", "fuzz", "FuzzDispatch", "seed-"+name)
		want := fuzzcorpus.File(input)
		if *update {
			writeGolden(t, path, []byte(want))
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("seed %s is missing or stale (err %v); run go test ./wire/dispatch/ -run TestSeedCorpus -update", path, err)
		}
	}
}

// requestIDs counts the request_ids of the well-framed ClientMessages in
// input, read as the dispatcher reads it.
func requestIDs(input []byte) map[uint64]int {
	ids := map[uint64]int{}
	rd := framing.NewReader(bytes.NewReader(input), 4096)
	for {
		b, err := rd.ReadFrame()
		if err != nil {
			return ids
		}
		var m pb.ClientMessage
		if proto.Unmarshal(b, &m) != nil {
			continue
		}
		for _, r := range []interface{ GetRequestId() uint64 }{m.GetGetState(), m.GetPutState(), m.GetDeleteState(), m.GetWatchState(), m.GetUnwatchState(), m.GetWatchStateAck()} {
			if id := r.GetRequestId(); id != 0 {
				ids[id]++
			}
		}
	}
}
