package reconcile

import (
	"fmt"
	"slices"

	"github.com/keeppeek/statestore/worker/intent"
)

// plan is what one pass decided for one desired intent: either a command
// to issue against the source's current session, or why not yet.
type plan struct {
	state   State // Waiting or Invalid when no command is planned
	reason  string
	session string // the source session the command targets
	pub     *PublicationRequest
	sub     *SubscribeRequest
}

// decide validates a desired intent against the source's current
// advertisement (ok false: no session) and the codecs this worker handles
// (empty: any). Invalid is for what no capability change can fix (checked
// first, so a publish intent without a valid recording mode never gets as
// far as a command); Waiting for what a later advertisement may.
func decide(in intent.Intent, src Source, ok bool, codecs []string) plan {
	if err := in.Check(); err != nil {
		return plan{state: Invalid, reason: err.Error()}
	}
	if !ok {
		return plan{state: Waiting, reason: fmt.Sprintf("source %q has no session", in.SourceID)}
	}
	if !src.HasStream(in.MediaKind) {
		return plan{state: Waiting, reason: fmt.Sprintf("source %q carries no %s stream", in.SourceID, in.MediaKind)}
	}
	codecOK := func(c string) bool { return len(codecs) == 0 || slices.Contains(codecs, c) }
	if in.Role == intent.Publish {
		return decidePublish(in, src, codecOK)
	}
	req := &SubscribeRequest{SourceSessionID: src.SessionID, MediaKind: in.MediaKind, VariantID: in.VariantID}
	if in.VariantID == "" {
		// Automatic selection is the server's; the worker only checks
		// that something of the kind is ready to select from.
		for _, v := range src.Variants {
			if v.MediaKind == in.MediaKind && v.Ready && codecOK(v.Codec) {
				return plan{session: src.SessionID, sub: req}
			}
		}
		return plan{state: Waiting, reason: fmt.Sprintf("no ready %s variant of source %q", in.MediaKind, in.SourceID)}
	}
	v, found := src.Variant(in.VariantID)
	switch {
	case !found:
		return plan{state: Waiting, reason: fmt.Sprintf("variant %q is not advertised", in.VariantID)}
	case v.MediaKind != in.MediaKind:
		return plan{state: Invalid, reason: fmt.Sprintf("variant %q is %s, intent asks for %s", v.ID, v.MediaKind, in.MediaKind)}
	case !codecOK(v.Codec):
		return plan{state: Invalid, reason: fmt.Sprintf("variant %q codec %s is not one this worker handles", v.ID, v.Codec)}
	case !v.Ready:
		return plan{state: Waiting, reason: fmt.Sprintf("variant %q is not ready", in.VariantID)}
	}
	return plan{session: src.SessionID, sub: req}
}

func decidePublish(in intent.Intent, src Source, codecOK func(string) bool) plan {
	profileID := in.OutputProfile
	if profileID == "" {
		profileID = in.VariantID
	}
	variant := in.VariantID
	if variant == "" {
		variant = profileID
	}
	if profileID == "" {
		return plan{state: Invalid, reason: "publish intent names neither output_profile nor variant_id"}
	}
	if !src.Publishable {
		return plan{state: Waiting, reason: fmt.Sprintf("source %q does not allow publication", in.SourceID)}
	}
	if in.RecordingMode == intent.RecordingRequired && !src.Recordable {
		return plan{state: Waiting, reason: fmt.Sprintf("recording_mode required but source %q has no recording capability", in.SourceID)}
	}
	prof, found := src.Profile(profileID)
	if !found {
		return plan{state: Waiting, reason: fmt.Sprintf("output profile %q is not offered for source %q", profileID, in.SourceID)}
	}
	if !codecOK(prof.Codec) {
		return plan{state: Invalid, reason: fmt.Sprintf("output profile %q codec %s is not one this worker produces", prof.ID, prof.Codec)}
	}
	return plan{session: src.SessionID, pub: &PublicationRequest{
		SourceSessionID: src.SessionID, MediaKind: in.MediaKind, VariantID: variant,
		OutputProfile: profileID, RecordingMode: in.RecordingMode,
	}}
}
