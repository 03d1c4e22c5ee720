package cv

import (
	"strings"
	"testing"

	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// TestDecide: a Subscribe is planned only when the source has a session,
// carries the stream, advertises the model profile for it and has a ready
// variant (the named one, or any of the kind for automatic selection);
// what a later advertisement can fix waits, what it cannot is invalid.
func TestDecide(t *testing.T) {
	t.Parallel()
	people := []ModelProfile{{ID: "people", MediaKind: intent.Video}}
	src := reconcile.Source{ID: "cam", SessionID: "s-1", Streams: []intent.MediaKind{intent.Video, intent.Audio},
		Variants: []reconcile.Variant{
			{ID: "main", MediaKind: intent.Video, Ready: true},
			{ID: "sub", MediaKind: intent.Video},
			{ID: "mic", MediaKind: intent.Audio, Ready: true},
		}}
	target := Target{SourceID: "cam", MediaKind: intent.Video, Model: "people"}
	with := func(f func(*Target)) Target { t := target; f(&t); return t }
	tests := []struct {
		name     string
		target   Target
		ok       bool // the source has a session
		profiles []ModelProfile
		state    State // "" for a planned Subscribe
		reason   string
		variant  string // the Subscribe's variant
	}{
		{"automatic selection", target, true, people, "", "", ""},
		{"the named ready variant", with(func(t *Target) { t.VariantID = "main" }), true, people, "", "", "main"},
		{"no session", target, false, people, Waiting, "has no session", ""},
		{"model not advertised", target, true, nil, Waiting, `model profile "people" is not advertised`, ""},
		{"model for another kind", target, true, []ModelProfile{{ID: "people", MediaKind: intent.Audio}}, Invalid, "analyses audio", ""},
		{"the named variant not ready", with(func(t *Target) { t.VariantID = "sub" }), true, people, Waiting, `"sub" is not ready`, ""},
		{"the named variant not advertised", with(func(t *Target) { t.VariantID = "4k" }), true, people, Waiting, "not advertised", ""},
		{"the named variant of another kind", with(func(t *Target) { t.VariantID = "mic" }), true, people, Invalid, `"mic" is audio`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := decide(tc.target, src, tc.ok, tc.profiles)
			if tc.state == "" {
				if p.req == nil {
					t.Fatalf("no Subscribe planned: %s %s", p.state, p.reason)
				}
				if p.req.SourceSessionID != "s-1" || p.req.MediaKind != intent.Video || p.req.VariantID != tc.variant {
					t.Fatalf("Subscribe %+v", *p.req)
				}
				return
			}
			if p.req != nil || p.state != tc.state || !strings.Contains(p.reason, tc.reason) {
				t.Fatalf("plan %s %q (Subscribe %v), want %s %q", p.state, p.reason, p.req, tc.state, tc.reason)
			}
		})
	}
	audioOnly := src
	audioOnly.Streams = []intent.MediaKind{intent.Audio}
	if p := decide(target, audioOnly, true, people); p.req != nil || p.state != Waiting || !strings.Contains(p.reason, "carries no video stream") {
		t.Fatalf("a source without the stream: %+v", p)
	}
	noneReady := src
	noneReady.Variants = noneReady.Variants[1:2]
	if p := decide(target, noneReady, true, people); p.req != nil || p.state != Waiting || !strings.Contains(p.reason, "no ready video variant") {
		t.Fatalf("no ready variant: %+v", p)
	}
}
