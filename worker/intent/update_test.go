package intent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/stateclient"
)

var ctx = context.Background()

// racingClient lets another writer commit between this writer's read and
// its write, as often as race says, and records every write's
// expected_revision.
type racingClient struct {
	stateclient.Client
	race   func() bool
	other  func()
	gets   int
	expect []statestore.Expect
}

func (c *racingClient) Get(ctx context.Context, ns, key string) (statestore.Entry, error) {
	c.gets++
	e, err := c.Client.Get(ctx, ns, key)
	if c.race() {
		c.other()
	}
	return e, err
}

func (c *racingClient) Put(ctx context.Context, r statestore.PutRequest) (statestore.Entry, error) {
	c.expect = append(c.expect, r.Expect)
	return c.Client.Put(ctx, r)
}

// TestFailureCASLoserRereadsAndRetries: two coordinators change the same
// intent from the same revision; the loser gets CONFLICT, rereads, merges
// its own change into the winner's document and writes with compare-and-set
// again, never blind, so both changes survive.
func TestFailureCASLoserRereadsAndRetries(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	const ns, key = "service/transcoder-a", "intents/front-door-video"
	a := stateclient.As(st.Store, statestore.Principal{ID: "coordinator-a", Admin: true})
	b := stateclient.As(st.Store, statestore.Principal{ID: "coordinator-b", Admin: true})
	base := intent.Intent{Role: intent.Publish, Desired: true, SourceID: "front-door", MediaKind: intent.Video,
		VariantID: "browser-h264-720p", OutputProfile: "browser-h264-720p", Priority: 10, RecordingMode: intent.RecordingDisabled}
	if _, err := intent.Update(ctx, a, st.Reg, ns, key, 0, func(intent.Intent, bool) (intent.Intent, error) { return base, nil }); err != nil {
		t.Fatal(err)
	}
	// b's change: require recording. a's change, committed right after b
	// read: raise the priority.
	raced := false
	loser := &racingClient{Client: b, race: func() bool { r := !raced; raced = true; return r }, other: func() {
		if _, err := intent.Update(ctx, a, st.Reg, ns, key, 0, func(cur intent.Intent, _ bool) (intent.Intent, error) {
			cur.Priority = 90
			return cur, nil
		}); err != nil {
			t.Fatal(err)
		}
	}}
	var merges int
	e, err := intent.Update(ctx, loser, st.Reg, ns, key, 0, func(cur intent.Intent, exists bool) (intent.Intent, error) {
		merges++
		if !exists {
			t.Fatal("the intent vanished")
		}
		cur.RecordingMode = intent.RecordingRequired
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if loser.gets != 2 || merges != 2 || len(loser.expect) != 2 {
		t.Fatalf("loser read %d times, merged %d, wrote %d: want a reread and one retry", loser.gets, merges, len(loser.expect))
	}
	for i, x := range loser.expect {
		if _, set := x.Revision(); !set {
			t.Fatalf("write %d was blind", i)
		}
	}
	got, err := intent.Parse(st.Reg, e.Document)
	if err != nil || got.Priority != 90 || got.RecordingMode != intent.RecordingRequired || e.Owner != "coordinator-b" {
		t.Fatalf("merged intent %+v (owner %s) %v: want both writers' changes", got, e.Owner, err)
	}
	if rev, _ := loser.expect[1].Revision(); rev != e.Revision-1 {
		t.Fatalf("retry expected revision %d, want the winner's %d", rev, e.Revision-1)
	}
}

// TestUpdateGivesUpWhenAlwaysContended: a key changed under every attempt
// ends in a ContendedError wrapping CONFLICT, after MaxUpdateAttempts
// compare-and-set writes and no blind one.
func TestUpdateGivesUpWhenAlwaysContended(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	const ns, key = "user/alice", "subscriptions/front-door"
	alice := stateclient.As(st.Store, statestore.Principal{ID: "alice"})
	in := intent.Intent{Role: intent.Subscribe, Desired: true, SourceID: "front-door", MediaKind: intent.Video}
	keep := func(cur intent.Intent, _ bool) (intent.Intent, error) { cur.Priority++; return cur, nil }
	if _, err := intent.Update(ctx, alice, st.Reg, ns, key, 0, func(intent.Intent, bool) (intent.Intent, error) { return in, nil }); err != nil {
		t.Fatal(err)
	}
	c := &racingClient{Client: alice, race: func() bool { return true }, other: func() {
		if _, err := intent.Update(ctx, alice, st.Reg, ns, key, 0, keep); err != nil {
			t.Fatal(err)
		}
	}}
	_, err := intent.Update(ctx, c, st.Reg, ns, key, 0, keep)
	var ce *intent.ContendedError
	if !errors.As(err, &ce) || !errors.Is(err, statestore.ErrConflict) || len(c.expect) != intent.MaxUpdateAttempts {
		t.Fatalf("want ContendedError after %d writes, got %v after %d", intent.MaxUpdateAttempts, err, len(c.expect))
	}
}
