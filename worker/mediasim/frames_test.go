package mediasim_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/keeppeek/statestore/worker/cv"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// readFrames takes every frame queued on ch without waiting, and whether
// ch is closed.
func readFrames(ch <-chan cv.Frame) (seqs []uint64, closed bool) {
	for {
		select {
		case f, ok := <-ch:
			if !ok {
				return seqs, true
			}
			seqs = append(seqs, f.Seq)
		default:
			return seqs, false
		}
	}
}

// TestFramesFollowSubscriptions: frames reach the live subscriptions of the
// source's current session and no one else, numbered per subscription; a
// subscription's stream closes however it ends; a full buffer drops frames
// instead of growing; and the catalog keeps what it is given.
func TestFramesFollowSubscriptions(t *testing.T) {
	t.Parallel()
	sim := mediasim.New()
	sp := spec()
	sp.Models = []cv.ModelProfile{{ID: "people", MediaKind: intent.Video}}
	session := sim.Connect("src", sp)
	if err := sim.MarkReady("src", "cam"); err != nil {
		t.Fatal(err)
	}
	if got := sim.ModelProfiles("src"); len(got) != 1 || got[0].ID != "people" {
		t.Fatalf("model profiles %+v", got)
	}
	sub := func(principal string) (reconcile.Binding, <-chan cv.Frame) {
		t.Helper()
		b, err := sim.Client(principal).Subscribe(ctx, reconcile.SubscribeRequest{SourceSessionID: session, MediaKind: intent.Video, VariantID: "cam"})
		if err != nil {
			t.Fatal(err)
		}
		ch, err := sim.Client(principal).Frames(b.ID)
		if err != nil {
			t.Fatal(err)
		}
		return b, ch
	}
	a, aFrames := sub("a")
	if n, err := sim.EmitFrames("src", 2); err != nil || n != 2 {
		t.Fatalf("emit to one subscription: %d %v", n, err)
	}
	_, bFrames := sub("b")
	if n, _ := sim.EmitFrames("src", 3); n != 6 {
		t.Fatalf("emit to two subscriptions delivered %d, want 6", n)
	}
	if got, _ := readFrames(aFrames); len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Fatalf("a's frames %v, want 1 to 5", got)
	}
	if got, _ := readFrames(bFrames); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("b's frames %v, want 1 to 3 (it missed what came before it)", got)
	}
	if _, err := sim.Client("b").Frames(a.ID); !errors.Is(err, &reconcile.CommandError{Code: reconcile.SubscribeNotFound}) {
		t.Fatalf("b took a's frames: %v", err)
	}

	// Unsubscribe closes a's stream; b's ends with the session.
	if err := sim.Client("a").Unsubscribe(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, closed := readFrames(aFrames); !closed {
		t.Fatal("a's frames stayed open after Unsubscribe")
	}
	if _, err := sim.Client("a").Frames(a.ID); err == nil {
		t.Fatal("frames of an ended subscription")
	}
	session = sim.Connect("src", sp)
	if _, closed := readFrames(bFrames); !closed {
		t.Fatal("b's frames stayed open after its source session ended")
	}
	if n, _ := sim.EmitFrames("src", 5); n != 0 {
		t.Fatalf("frames reached %d subscribers of an ended session", n)
	}
	if err := sim.MarkReady("src", "cam"); err != nil {
		t.Fatal(err)
	}

	// A reader that never reads gets FrameBuffer frames and no more.
	_, cFrames := sub("c")
	if n, _ := sim.EmitFrames("src", mediasim.FrameBuffer+10); n != mediasim.FrameBuffer {
		t.Fatalf("delivered %d to a full buffer, want %d", n, mediasim.FrameBuffer)
	}
	if got, _ := readFrames(cFrames); len(got) != mediasim.FrameBuffer {
		t.Fatalf("%d frames queued", len(got))
	}
	// Withdrawing the variant ends the subscription to it, and its frames.
	if err := sim.RemoveVariant("src", "cam"); err != nil {
		t.Fatal(err)
	}
	if _, closed := readFrames(cFrames); !closed {
		t.Fatal("frames stayed open after the variant was withdrawn")
	}
	if _, err := sim.EmitFrames("nowhere", 1); err == nil {
		t.Fatal("frames from a source that is not connected")
	}

	doc := []byte(`{"anything":"at all"}`)
	if err := sim.Client("a").PublishEvent(ctx, "keeppeek.whatever.v1", doc); err != nil {
		t.Fatal(err)
	}
	doc[0] = 'X' // the catalog keeps its own copy
	ev := sim.Events()
	if len(ev) != 1 || ev[0].Principal != "a" || ev[0].Schema != "keeppeek.whatever.v1" || !bytes.Equal(ev[0].Document, []byte(`{"anything":"at all"}`)) {
		t.Fatalf("catalog %+v", ev)
	}
}
