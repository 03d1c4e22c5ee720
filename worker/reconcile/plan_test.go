package reconcile

import (
	"strings"
	"testing"

	"github.com/keeppeek/statestore/worker/intent"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	src := Source{ID: "front-door", SessionID: "s-1", Streams: []intent.MediaKind{intent.Video}, Publishable: true,
		Profiles: []Profile{{ID: "browser-h264-720p", Codec: "h264"}, {ID: "browser-av1-1080p", Codec: "av1"}},
		Variants: []Variant{{ID: "cam", MediaKind: intent.Video, Codec: "h264", Ready: true}, {ID: "slow", MediaKind: intent.Video, Codec: "h264"},
			{ID: "hevc", MediaKind: intent.Video, Codec: "h265", Ready: true}}}
	pub := intent.Intent{Role: intent.Publish, Desired: true, SourceID: "front-door", MediaKind: intent.Video,
		OutputProfile: "browser-h264-720p", RecordingMode: intent.RecordingDisabled}
	sub := intent.Intent{Role: intent.Subscribe, Desired: true, SourceID: "front-door", MediaKind: intent.Video}
	with := func(in intent.Intent, f func(*intent.Intent)) intent.Intent { f(&in); return in }
	tests := []struct {
		name   string
		in     intent.Intent
		src    Source
		down   bool
		codecs []string
		state  State // "" when a command is planned
		reason string
	}{
		{"publish", pub, src, false, []string{"h264"}, "", ""},
		{"publish without recording_mode", with(pub, func(i *intent.Intent) { i.RecordingMode = "" }), src, false, nil, Invalid, "recording_mode"},
		{"publish with unknown recording_mode", with(pub, func(i *intent.Intent) { i.RecordingMode = "always" }), src, false, nil, Invalid, "recording_mode"},
		{"invalid mode beats a missing source", with(pub, func(i *intent.Intent) { i.RecordingMode = "" }), Source{}, true, nil, Invalid, "recording_mode"},
		{"source without a session", pub, Source{}, true, nil, Waiting, "no session"},
		{"no such stream", with(pub, func(i *intent.Intent) { i.MediaKind = intent.Audio }), src, false, nil, Waiting, "no audio stream"},
		{"publication not allowed", pub, withSource(src, func(s *Source) { s.Publishable = false }), false, nil, Waiting, "does not allow publication"},
		{"recording required, none", with(pub, func(i *intent.Intent) { i.RecordingMode = intent.RecordingRequired }), src, false, nil, Waiting, "no recording capability"},
		{"recording required, capable", with(pub, func(i *intent.Intent) { i.RecordingMode = intent.RecordingRequired }), withSource(src, func(s *Source) { s.Recordable = true }), false, nil, "", ""},
		{"unknown output profile", with(pub, func(i *intent.Intent) { i.OutputProfile = "vr-8k" }), src, false, nil, Waiting, "not offered"},
		{"codec this worker cannot produce", with(pub, func(i *intent.Intent) { i.OutputProfile = "browser-av1-1080p" }), src, false, []string{"h264"}, Invalid, "codec av1"},
		{"publish naming no output", with(pub, func(i *intent.Intent) { i.OutputProfile = "" }), src, false, nil, Invalid, "neither"},
		{"subscribe exact ready", with(sub, func(i *intent.Intent) { i.VariantID = "cam" }), src, false, nil, "", ""},
		{"subscribe exact not ready", with(sub, func(i *intent.Intent) { i.VariantID = "slow" }), src, false, nil, Waiting, "not ready"},
		{"subscribe exact not advertised", with(sub, func(i *intent.Intent) { i.VariantID = "ghost" }), src, false, nil, Waiting, "not advertised"},
		{"subscribe exact, codec refused", with(sub, func(i *intent.Intent) { i.VariantID = "hevc" }), src, false, []string{"h264"}, Invalid, "codec h265"},
		{"subscribe exact, wrong kind", with(sub, func(i *intent.Intent) { i.VariantID = "cam"; i.MediaKind = intent.Audio }), withSource(src, func(s *Source) { s.Streams = append(s.Streams, intent.Audio) }), false, nil, Invalid, "is video"},
		{"subscribe automatic", sub, src, false, nil, "", ""},
		{"subscribe automatic, nothing ready", sub, withSource(src, func(s *Source) { s.Variants = s.Variants[1:2] }), false, nil, Waiting, "no ready video variant"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := decide(tc.in, tc.src, !tc.down, tc.codecs)
			planned := p.pub != nil || p.sub != nil
			if tc.state == "" {
				if !planned || p.session != "s-1" {
					t.Fatalf("want a command on s-1, got %+v", p)
				}
				if p.pub != nil && (p.pub.RecordingMode != tc.in.RecordingMode || p.pub.SourceSessionID != "s-1") {
					t.Fatalf("publication request %+v", *p.pub)
				}
				if p.sub != nil && p.sub.VariantID != tc.in.VariantID {
					t.Fatalf("subscribe request %+v", *p.sub)
				}
				return
			}
			if planned || p.state != tc.state || !strings.Contains(p.reason, tc.reason) {
				t.Fatalf("got %+v, want %s containing %q and no command", p, tc.state, tc.reason)
			}
		})
	}
}

func withSource(s Source, f func(*Source)) Source {
	s.Variants = append([]Variant(nil), s.Variants...)
	f(&s)
	return s
}

func TestNewRejectsConfig(t *testing.T) {
	t.Parallel()
	reg := registry(t)
	base := Config{Namespace: "service/t", Holder: "w", Schemas: reg, Capabilities: nopCaps{}, Media: nopMedia{}, LeasePrefix: "leases/"}
	tests := []struct {
		field string
		mod   func(*Config)
	}{
		{"namespace", func(c *Config) { c.Namespace = "" }},
		{"holder", func(c *Config) { c.Holder = "" }},
		{"schemas", func(c *Config) { c.Schemas = nil }},
		{"capabilities", func(c *Config) { c.Capabilities = nil }},
		{"media", func(c *Config) { c.Media = nil }},
		{"status_prefix", func(c *Config) { c.StatusPrefix = "intents/status/" }},
		{"status_prefix", func(c *Config) { c.StatusPrefix = "in" }},
		{"lease_prefix", func(c *Config) { c.LeasePrefix = "intents/" }},
		{"lease_prefix", func(c *Config) { c.LeasePrefix = "status/leases/" }},
	}
	for _, tc := range tests {
		c := base
		tc.mod(&c)
		_, err := New(c)
		ce, ok := err.(*ConfigError)
		if !ok || ce.Field != tc.field {
			t.Fatalf("%+v: want ConfigError on %s, got %v", c, tc.field, err)
		}
	}
	if _, err := New(base); err != nil {
		t.Fatal(err)
	}
}
