package replica

import (
	"sync"

	"github.com/hashicorp/raft"
)

// MaxRPCsInFlight is how many AppendEntries a leader keeps in flight to
// each follower on its pipeline: the next batch travels while the
// follower fdatasyncs the one before, which one request at a time would
// leave the leader waiting out (a round trip beside that fdatasync).
const MaxRPCsInFlight = 2

// Transport is raft's network transport with pipelined replication that
// cannot leave raft's Shutdown hanging. Raft v1.8.0's pipeline has two
// decoders in a row: the transport's reads each answer off the connection
// and hands it to raft's, which returns for good on the first answer that
// is not a success (a newer term, a log mismatch, a broken connection).
// Nothing then reads the transport's decoder's next answer, so it blocks
// handing it on; a replication goroutine sending meanwhile blocks handing
// its request to that decoder; and raft closes the pipeline only after
// that goroutine returns, so a leader that lost its term could wait in
// Shutdown for ever (seen under -race in TestClusterOverTCP/tls). Every
// pipeline Transport opens relays the answers itself and closes the
// transport's pipeline right after relaying the one raft stops on, which
// turns that blocked send into raft's ErrPipelineShutdown: raft's
// replication then leaves the pipeline as it does after any failed send.
type Transport struct {
	*raft.NetworkTransport
}

// AppendEntriesPipeline opens a pipeline to target whose answers are
// relayed by relay (Transport says why).
func (t *Transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	inner, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	p := &relayPipeline{inner: inner, out: make(chan raft.AppendFuture), done: make(chan struct{})}
	go p.relay()
	return p, nil
}

// relayPipeline is a raft.AppendPipeline whose answers pass through relay.
type relayPipeline struct {
	inner raft.AppendPipeline
	out   chan raft.AppendFuture
	done  chan struct{}
	once  sync.Once
}

func (p *relayPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	return p.inner.AppendEntries(args, resp)
}

func (p *relayPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// Close ends the relay and the transport's pipeline; raft calls it once
// its replication left the pipeline, relay may have called it before.
func (p *relayPipeline) Close() error {
	p.once.Do(func() { close(p.done) })
	return p.inner.Close()
}

// relay hands the transport's answers to raft in order until the first
// one raft's decoder stops on (its own test: a failed answer, a newer
// term or no success), then closes the transport's pipeline, since no
// answer after that one will ever be read.
func (p *relayPipeline) relay() {
	in := p.inner.Consumer()
	for {
		select {
		case f := <-in:
			resp := f.Response()
			final := f.Error() != nil || resp.Term > f.Request().Term || !resp.Success
			select {
			case p.out <- f:
			case <-p.done:
				return
			}
			if final {
				_ = p.Close()
				return
			}
		case <-p.done:
			return
		}
	}
}
