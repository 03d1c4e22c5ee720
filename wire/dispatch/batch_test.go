package dispatch

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore/wire/framing"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// batchRecorder is a BatchSender's SendBatch that decodes and records
// each batch, and fails the batch holding the request failAt.
type batchRecorder struct {
	batches [][]uint64 // the request IDs of each batch, in order
	failAt  uint64
}

func (r *batchRecorder) sendBatch(ms []framing.Encoded) error {
	var ids []uint64
	for _, m := range ms {
		b, err := m.AppendTo(nil)
		if err != nil {
			return err
		}
		var sm pb.ServerMessage
		if err := proto.Unmarshal(b, &sm); err != nil {
			return err
		}
		id := sm.GetResult().GetRequestId()
		ids = append(ids, id)
		if id == r.failAt {
			r.batches = append(r.batches, ids)
			return errors.New("the connection broke")
		}
	}
	r.batches = append(r.batches, ids)
	return nil
}

func answer(id uint64) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: &pb.StateStoreResult{RequestId: id}}}
}

// TestWriterBatchesWhatQueued: while the writer is busy with one message,
// what queues up behind it goes out in order as one batch (a BatchSender's
// one write), bounded by maxBatchMessages; the budget gets every byte
// back; and a failed batch ends the session like a failed send.
func TestWriterBatchesWhatQueued(t *testing.T) {
	t.Parallel()
	b := newByteBudget(1 << 20)
	b.join()
	open, entered := make(chan struct{}), make(chan struct{}, 1)
	var sends int
	send := func(*pb.ServerMessage) error {
		sends++
		select {
		case entered <- struct{}{}:
		default:
		}
		<-open
		return nil
	}
	failed := make(chan struct{})
	o := newOutbox(1000, 10, b, send, func() { close(failed) })
	rec := &batchRecorder{failAt: maxBatchMessages + 10}
	o.sendBatch = rec.sendBatch
	done := make(chan error, 1)
	go func() { done <- o.run() }()
	// The first message holds the writer (its send waits on open) ...
	if err := o.queue(answer(1), nil); err != nil {
		t.Fatal(err)
	}
	<-entered
	// ... while more than a batch's worth queues behind it.
	total := uint64(maxBatchMessages + 20)
	for id := uint64(2); id <= total; id++ {
		if err := o.queue(answer(id), nil); err != nil {
			t.Fatal(err)
		}
	}
	close(open)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the writer ended without the failed batch's error")
		}
	case <-time.After(guard):
		t.Fatalf("the writer did not end within %v: %d sends, batches %v", guard, sends, rec.batches)
	}
	<-failed
	if sends != 1 {
		t.Fatalf("%d messages went through Send, want the first alone", sends)
	}
	if len(rec.batches) != 2 || len(rec.batches[0]) != maxBatchMessages {
		t.Fatalf("batches %v: want one of %d, then the failing one", rec.batches, maxBatchMessages)
	}
	next := uint64(2)
	for _, batch := range rec.batches {
		for _, id := range batch {
			if id != next {
				t.Fatalf("batches %v: request %d where %d was next", rec.batches, id, next)
			}
			next++
		}
	}
	if next != rec.failAt+1 {
		t.Fatalf("batches %v end before the failing request %d", rec.batches, rec.failAt)
	}
	// What was sent and what was taken into the failed batch gave its
	// bytes back; what the failure left queued is dropped at leave.
	b.leave(o)
	if used, _ := b.usage(); used != 0 {
		t.Fatalf("the budget still counts %d bytes", used)
	}
}
