package replica

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// hangBound is how long a test waits for what would otherwise hang.
const hangBound = 10 * time.Second

// listen is a raft stream layer on a fresh loopback port.
func listen(t *testing.T) *plainStream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &plainStream{ln}
}

// fakePeer answers the raft RPCs reaching tr as a voter that grants every
// vote and accepts the first ok AppendEntries of each term, then answers
// every later one with a newer term, until done is closed.
func fakePeer(tr *raft.NetworkTransport, ok int, done <-chan struct{}) {
	appends := map[uint64]int{}
	for {
		select {
		case <-done:
			return
		case rpc := <-tr.Consumer():
			switch req := rpc.Command.(type) {
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{Term: req.Term, Granted: true}, nil)
			case *raft.RequestPreVoteRequest:
				rpc.Respond(&raft.RequestPreVoteResponse{Term: req.Term, Granted: true}, nil)
			case *raft.AppendEntriesRequest:
				appends[req.Term]++
				if appends[req.Term] <= ok {
					last := req.PrevLogEntry
					if n := len(req.Entries); n > 0 {
						last = req.Entries[n-1].Index
					}
					rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: last, Success: true}, nil)
				} else {
					rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term + 1}, nil)
				}
			default:
				rpc.Respond(nil, fmt.Errorf("fake peer: %T not served", req))
			}
		}
	}
}

// TestPipelineSendAfterStaleTermFails replays, on the transport alone,
// what raft v1.8.0's replication does when a follower answers a pipelined
// AppendEntries with a newer term: raft's decoder reads that answer and
// stops reading, and the sending goroutine carries on sending until a
// send fails. Over raft's own pipeline the third send blocks for ever
// (the transport's decoder waits to hand on the second answer); over
// Transport's the sends fail once the stale answer was relayed.
func TestPipelineSendAfterStaleTermFails(t *testing.T) {
	t.Parallel()
	follower := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: listen(t), Timeout: hangBound})
	defer follower.Close()
	done := make(chan struct{})
	defer close(done)
	go fakePeer(follower, 0, done)
	leader := NewStreamTransport(listen(t))
	defer leader.Close()

	p, err := leader.AppendEntriesPipeline("f", follower.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	req := func() *raft.AppendEntriesRequest { return &raft.AppendEntriesRequest{Term: 1} }
	if _, err := p.AppendEntries(req(), new(raft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-p.Consumer():
		if err := f.Error(); err != nil || f.Response().Term != 2 {
			t.Fatalf("first answer: term %d, %v; want term 2", f.Response().Term, err)
		}
	case <-time.After(hangBound):
		t.Fatal("no answer on the pipeline")
	}
	// raft's decoder has stopped: nothing reads the consumer again.
	sent := make(chan error, 1)
	go func() {
		for range 16 {
			if _, err := p.AppendEntries(req(), new(raft.AppendEntriesResponse)); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	select {
	case err := <-sent:
		if err == nil {
			t.Fatal("16 sends after the stale answer all went through; want the pipeline closed")
		}
	case <-time.After(hangBound):
		t.Fatalf("a send after the stale answer blocked for %v", hangBound)
	}
}

// TestLeaderLosingTermOnPipelineShutsDown: a raft node leads two fake
// voters that accept its first AppendEntries and answer every later one
// with a newer term, so it loses its term on a pipelined answer while its
// replication keeps sending; it must step down and its Shutdown return.
// Over raft's own pipeline this hung Shutdown (Transport says why); run
// it with -count and -race to shake the interleavings.
func TestLeaderLosingTermOnPipelineShutsDown(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	defer close(done)
	peers := []Peer{{ID: "self"}}
	for _, id := range []string{"x", "y"} {
		f := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: listen(t), Timeout: hangBound})
		defer f.Close()
		go fakePeer(f, 8, done)
		peers = append(peers, Peer{ID: id, Addr: string(f.LocalAddr())})
	}
	tr := NewStreamTransport(listen(t))
	defer tr.Close()
	peers[0].Addr = string(tr.LocalAddr())
	n, err := Start(Config{NodeID: "self", Addr: peers[0].Addr, Peers: peers, Transport: tr}, &countFSM{})
	if err != nil {
		t.Fatal(err)
	}
	// The node wins its election (the fakes grant every vote) and loses
	// the term on the fakes' third AppendEntries (heartbeats count), again after each of its
	// next elections; meanwhile commands keep its replication sending.
	leaders := make(chan raft.Observation, 64)
	n.Raft().RegisterObserver(raft.NewObserver(leaders, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	// The applier keeps raft's replication triggered, so its sender has
	// a send ready beside the decoder's stop, through Shutdown too.
	stopApply := make(chan struct{})
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		for range 1 << 20 {
			select {
			case <-stopApply:
				return
			default:
			}
			if n.Raft().State() != raft.Leader {
				// Between terms: a follower answers at once, so wait.
				select {
				case <-stopApply:
					return
				case <-time.After(time.Millisecond):
				}
				continue
			}
			// Not waiting for the commit keeps a send always due.
			n.Raft().Apply([]byte("x"), 10*time.Millisecond)
		}
	}()
	defer func() { close(stopApply); <-applied }()
	deadline := time.After(hangBound)
	for lost := 0; lost < 5; {
		select {
		case o := <-leaders:
			if o.Data.(raft.LeaderObservation).LeaderID == "" {
				lost++
			}
		case <-deadline:
			t.Fatalf("the node lost its term %d times within %v, want 5", lost, hangBound)
		}
	}
	shut := make(chan error, 1)
	go func() { shut <- n.Shutdown() }()
	select {
	case err := <-shut:
		if err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
			t.Fatal(err)
		}
	case <-time.After(hangBound):
		t.Fatalf("Shutdown did not return within %v", hangBound)
	}
}
