package mediasim_test

import (
	"context"
	"errors"
	"testing"

	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

var ctx = context.Background()

func spec() mediasim.SourceSpec {
	return mediasim.SourceSpec{Streams: []intent.MediaKind{intent.Video}, Publishable: true,
		Profiles: []reconcile.Profile{{ID: "out", Codec: "h264"}},
		Variants: []reconcile.Variant{{ID: "cam", MediaKind: intent.Video, Codec: "h264", Ready: true}}}
}

func code(err error) reconcile.ErrorCode {
	var ce *reconcile.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func TestStartPublicationRefusals(t *testing.T) {
	t.Parallel()
	sim := mediasim.New()
	session := sim.Connect("src", spec())
	ok := reconcile.PublicationRequest{SourceSessionID: session, MediaKind: intent.Video, VariantID: "out", OutputProfile: "out", RecordingMode: intent.RecordingInherit}
	tests := []struct {
		name string
		mod  func(*reconcile.PublicationRequest)
		want reconcile.ErrorCode
	}{
		{"zero recording mode", func(r *reconcile.PublicationRequest) { r.RecordingMode = "" }, reconcile.PublicationRecordingModeInvalid},
		{"unknown recording mode", func(r *reconcile.PublicationRequest) { r.RecordingMode = "maybe" }, reconcile.PublicationRecordingModeInvalid},
		{"zero mode on a stale session", func(r *reconcile.PublicationRequest) { r.RecordingMode, r.SourceSessionID = "", "old" }, reconcile.PublicationRecordingModeInvalid},
		{"stale session", func(r *reconcile.PublicationRequest) { r.SourceSessionID = "old" }, reconcile.PublicationSourceUnavailable},
		{"recording required, not recordable", func(r *reconcile.PublicationRequest) { r.RecordingMode = intent.RecordingRequired }, reconcile.PublicationUnsupported},
		{"unknown profile", func(r *reconcile.PublicationRequest) { r.OutputProfile = "8k" }, reconcile.PublicationUnsupported},
		{"group without membership", func(r *reconcile.PublicationRequest) { r.Group = "g" }, reconcile.PublicationPermissionDenied},
	}
	// The cases run one by one, before the rest of the test changes sim's
	// ownership of the variant they all name.
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := ok
			tc.mod(&req)
			_, err := sim.Client("w1").StartPublication(ctx, req)
			if code(err) != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
		})
	}
	if len(sim.Bindings()) != 0 {
		t.Fatalf("a refused publication left a binding: %+v", sim.Bindings())
	}
	// The first owner wins the output variant; another principal conflicts;
	// once it stops, the variant is free again.
	b, err := sim.Client("w1").StartPublication(ctx, ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Client("w2").StartPublication(ctx, ok); code(err) != reconcile.PublicationConflict {
		t.Fatalf("second owner: %v", err)
	}
	if err := sim.Client("w2").StopPublication(ctx, b.ID); code(err) != reconcile.PublicationNotFound {
		t.Fatalf("w2 stopped w1's publication: %v", err)
	}
	if err := sim.Client("w1").StopPublication(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Client("w2").StartPublication(ctx, ok); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func TestSessionsAndReadiness(t *testing.T) {
	t.Parallel()
	sim := mediasim.New()
	changed := sim.Changed()
	s1 := sim.Connect("src", spec())
	select {
	case <-changed:
	default:
		t.Fatal("Connect did not signal a change")
	}
	src, _ := sim.Source("src")
	if v, _ := src.Variant("cam"); v.Ready {
		t.Fatal("a variant was ready as soon as it appeared")
	}
	sub := reconcile.SubscribeRequest{SourceSessionID: s1, MediaKind: intent.Video, VariantID: "cam"}
	if _, err := sim.Client("v").Subscribe(ctx, sub); code(err) != reconcile.SubscribeVariantUnavailable {
		t.Fatalf("subscribed to a variant not ready: %v", err)
	}
	if err := sim.MarkReady("src", "cam"); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Client("v").Subscribe(ctx, sub); err != nil {
		t.Fatal(err)
	}
	s2 := sim.Connect("src", spec())
	if s2 == s1 || len(sim.Bindings()) != 0 {
		t.Fatalf("reconnect: session %s (was %s), bindings %+v", s2, s1, sim.Bindings())
	}
	if _, err := sim.Client("v").Subscribe(ctx, sub); code(err) != reconcile.SubscribeSourceUnavailable {
		t.Fatalf("subscribed on the ended session: %v", err)
	}
	sim.Disconnect("src")
	if _, ok := sim.Source("src"); ok {
		t.Fatal("a disconnected source is still advertised")
	}
}

// TestEveryCommandIsLogged: each command, accepted or refused, is one Call
// naming its principal, its binding and its error, in the order received,
// which is what lets a worker's test prove a command was never sent.
func TestEveryCommandIsLogged(t *testing.T) {
	t.Parallel()
	sim := mediasim.New()
	session := sim.Connect("src", spec())
	pub := reconcile.PublicationRequest{SourceSessionID: session, MediaKind: intent.Video, VariantID: "out", OutputProfile: "out", RecordingMode: intent.RecordingInherit}
	w := sim.Client("w")
	p, err := w.StartPublication(ctx, pub)
	if err != nil {
		t.Fatal(err)
	}
	refused := pub
	refused.RecordingMode = ""
	_, refusedErr := w.StartPublication(ctx, refused)
	if err := sim.MarkReady("src", "cam"); err != nil {
		t.Fatal(err)
	}
	s, err := sim.Client("v").Subscribe(ctx, reconcile.SubscribeRequest{SourceSessionID: session, MediaKind: intent.Video, VariantID: "cam"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Client("v").Unsubscribe(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.StopPublication(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	want := []struct{ principal, command, id string }{
		{"w", "StartPublication", p.ID},
		{"w", "StartPublication", ""},
		{"v", "Subscribe", s.ID},
		{"v", "Unsubscribe", s.ID},
		{"w", "StopPublication", p.ID},
	}
	calls := sim.Calls()
	if len(calls) != len(want) {
		t.Fatalf("%d calls logged, want %d: %+v", len(calls), len(want), calls)
	}
	for i, c := range calls {
		if c.Principal != want[i].principal || c.Command != want[i].command || c.ID != want[i].id {
			t.Errorf("call %d = %s %s %q, want %s %s %q", i, c.Principal, c.Command, c.ID, want[i].principal, want[i].command, want[i].id)
		}
		if (c.Err != nil) != (i == 1) || (i == 1 && c.Err != refusedErr) {
			t.Errorf("call %d logged error %v", i, c.Err)
		}
	}
	if c := calls[1]; c.Pub.RecordingMode != "" {
		t.Errorf("the refused call logged recording mode %q, want the request as sent", c.Pub.RecordingMode)
	}
}
