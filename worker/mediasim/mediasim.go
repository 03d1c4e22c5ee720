// Package mediasim is a simulated KeepPeek media server for tests of
// workers and of embedders' own code: it implements reconcile.Capabilities
// and cv.Capabilities and, per principal, reconcile.Media and cv.Media,
// with the behaviours the specification makes workers cope with. For
// computer-vision workers it also carries media data, in process only
// (frames.go): EmitFrames has a source produce frames, which reach each
// live subscription to its current session, and the simulated event
// catalog (Events) keeps every event a worker publishes.
//
// Worker processes reach a Server of the test's process over HTTP:
// Server.Handler serves the operations workers call (Source, the change
// counter as a long poll, the four media commands and Join) as JSON, and
// Dial returns a Remote that implements reconcile.Capabilities,
// reconcile.Media and Join over it, as one principal. The principal is a
// request header the simulator believes, so serve it on loopback only; it
// is a test simulator, not an authenticated API.
//
// # Invariants
//
//  1. A source's session ID changes every time it connects; when it leaves,
//     every publication from it and subscription to it ends with the session.
//     Code: Server.Connect, Server.Disconnect, Server.endSessionLocked.
//     Tests: TestSessionsAndReadiness.
//  2. A variant is advertised from when it appears, and is Ready only once
//     MarkReady says so; Subscribe to a variant that is not ready fails.
//     Code: Server.AddVariant, Server.MarkReady, Client.Subscribe.
//     Tests: TestSessionsAndReadiness.
//  3. StartPublication refuses a zero or unknown recording mode with
//     PUBLICATION_ERROR_CODE_RECORDING_MODE_INVALID before anything else, and
//     answers PUBLICATION_ERROR_CODE_CONFLICT when another principal already
//     owns the output variant: it is the authority on variant ownership.
//     Code: Client.StartPublication.
//     Tests: TestStartPublicationRefusals.
//  4. Group membership comes only from a successful Join; nothing else (and
//     in particular nothing in the state store) grants it. A publication into
//     a group needs membership.
//     Code: Server.Join, Server.isMemberLocked, Client.StartPublication.
//     Tests: TestStartPublicationRefusals, grouppref.TestScenario6PreferredGroupGrantsNothing.
//  5. Every command is logged (Calls), so tests can prove a command was, or
//     was never, sent.
//     Code: Client.log, Server.Calls.
//     Tests: TestEveryCommandIsLogged.
//  6. Over HTTP every operation gives the same result and the same error
//     as in process: a refusal crosses field by field and comes back as
//     the same type (a *reconcile.CommandError with its command, code and
//     message, a *JoinRefusedError), so errors.As, errors.Is and
//     reconcile's code checks treat both alike. A request that gets no
//     result and no refusal (the server gone, a wrong URL) is a
//     *RequestError naming the operation, the URL and the status, never a
//     refusal, so reconcile reports it as Failed and retries, never as
//     Invalid. A malformed request gets 400 and changes nothing.
//     Code: Server.Handler, command, refusalOf, refusal.err, Remote.do, Remote.call.
//     Tests: TestRemoteMatchesInProcess, TestRequestErrorNamesOperationAndURL, TestHandlerRejectsBadRequests,
//     reconcile.TestScenario4TranscoderOwnsOutputVariant, reconcile.TestScenario5ViewerWaitsForReadyVariant.
//  7. Remote.Changed never misses a change made after the call: the poller
//     waits past the counter of its last answer, so a change made while a
//     poll or its answer is on its way moves the counter past it; a new
//     epoch (another Server) counts as a change. The first answer after a
//     failed request closes the channel whatever its counter, so a command
//     that failed because the server was unreachable is retried once it
//     answers, although no capability changed.
//     Code: Remote.Changed, Remote.poll, Remote.call, Server.serveChanged, Server.changeState.
//     Tests: TestChangedFiresOnServerSideChanges, TestChangedNeverMissesAChange,
//     TestOutageKeepsSourceAndWakesChanged, reconcile.TestRemoteTransientFailureIsRetried.
//  8. While the server is unreachable, Remote.Source answers what it last
//     answered for that source, so a failed request never makes a bound
//     source look disconnected (reconcile would forget a binding the
//     server still holds).
//     Code: Remote.Source.
//     Tests: TestOutageKeepsSourceAndWakesChanged.
//  9. A Remote is bounded: one poller goroutine, started by the first
//     Changed and ended (and waited for) by Close; a long poll held at most
//     MaxPollWait, every other request at most RequestTimeout; bodies read
//     up to fixed bounds; failed requests retried after a back-off that
//     doubles from RetryMin to RetryMax.
//     Code: Remote.Close, Remote.poll, Remote.backoff, Remote.do, Dial.
//     Tests: TestCloseEndsThePoller, TestDialRejectsBadArguments, TestHandlerRejectsBadRequests.
//  10. Frames flow only through a live subscription: EmitFrames reaches
//     the subscriptions to the source's current session, numbered from 1
//     per subscription, at most FrameBuffer unread; a subscription's frame
//     channel is closed however it ends (Unsubscribe, a new or ended
//     source session, its variant withdrawn, its principal gone), and only
//     its own principal may take it. The event catalog keeps exactly what
//     it was given, checking nothing, so tests see what a worker sent.
//     Code: Server.EmitFrames, Server.deleteBindingLocked, Client.Frames, Client.PublishEvent, Server.Events.
//     Tests: TestFramesFollowSubscriptions, cv.TestScenarioSourceSessionReplacedResubscribes.
package mediasim

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/keeppeek/statestore/worker/cv"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// SourceSpec is what a source advertises when it connects.
type SourceSpec struct {
	Streams     []intent.MediaKind
	Publishable bool
	Recordable  bool
	Profiles    []reconcile.Profile
	// Variants the source itself offers; they start not ready.
	Variants []reconcile.Variant
	// Models are the computer-vision model profiles the source may be
	// analysed with (ModelProfiles).
	Models []cv.ModelProfile
}

// Call is one media command as the server received it.
type Call struct {
	Principal string
	Command   string // Subscribe, Unsubscribe, StartPublication, StopPublication
	Sub       reconcile.SubscribeRequest
	Pub       reconcile.PublicationRequest
	ID        string // the binding the command named or created
	Err       error
}

type source struct {
	id       string
	session  string
	spec     SourceSpec
	variants []*reconcile.Variant
}

type bindingRec struct {
	id        string
	principal string
	sourceID  string
	session   string
	variant   string
	publish   bool
}

// Server is the simulated media server. All methods are safe for
// concurrent use.
type Server struct {
	mu       sync.Mutex
	sources  map[string]*source
	bindings map[string]*bindingRec
	groups   map[string]*group
	calls    []Call
	seq      int
	changed  chan struct{}
	// changes counts changedLocked calls and epoch names this Server, so
	// the HTTP API's long poll can tell a client what it missed (http.go).
	changes uint64
	epoch   string
	// frames holds each live subscription's frame stream (frames.go);
	// events is the simulated event catalog.
	frames map[string]*frameStream
	events []CatalogEvent
}

type group struct {
	admits  map[string]bool
	members map[string]bool
}

// New returns a server with no sources.
func New() *Server {
	return &Server{sources: map[string]*source{}, bindings: map[string]*bindingRec{}, groups: map[string]*group{}, changed: make(chan struct{}), epoch: rand.Text(),
		frames: map[string]*frameStream{}}
}

// changedLocked wakes every Changed waiter.
func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
	s.changes++
}

func (s *Server) nextID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s-%d", prefix, s.seq)
}

// Changed implements reconcile.Capabilities.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Connect brings source id up under a new session ID (replacing any
// earlier session, whose bindings end) and returns that ID.
func (s *Server) Connect(id string, spec SourceSpec) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endSessionLocked(id)
	src := &source{id: id, session: s.nextID("session-" + id), spec: spec}
	for _, v := range spec.Variants {
		v.Ready = false
		src.variants = append(src.variants, &v)
	}
	s.sources[id] = src
	s.changedLocked()
	return src.session
}

// Disconnect takes source id down: its session ends, and with it every
// publication from it and subscription to it.
func (s *Server) Disconnect(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endSessionLocked(id)
	delete(s.sources, id)
	s.changedLocked()
}

func (s *Server) endSessionLocked(id string) {
	src := s.sources[id]
	if src == nil {
		return
	}
	for bid, b := range s.bindings {
		if b.session == src.session {
			s.deleteBindingLocked(bid)
		}
	}
}

// sourceLocked returns the connected source id.
func (s *Server) sourceLocked(id string) (*source, error) {
	if src := s.sources[id]; src != nil {
		return src, nil
	}
	return nil, fmt.Errorf("mediasim: source %q has no session", id)
}

// AddVariant advertises a new variant of source id, not yet ready.
func (s *Server) AddVariant(id string, v reconcile.Variant) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := s.sourceLocked(id)
	if err != nil {
		return err
	}
	v.Ready = false
	src.variants = append(src.variants, &v)
	s.changedLocked()
	return nil
}

// MarkReady makes a variant of source id ready to subscribe to.
func (s *Server) MarkReady(id, variantID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := s.sourceLocked(id)
	if err != nil {
		return err
	}
	for _, v := range src.variants {
		if v.ID == variantID {
			v.Ready = true
			s.changedLocked()
			return nil
		}
	}
	return fmt.Errorf("mediasim: source %q has no variant %q", id, variantID)
}

// Source implements reconcile.Capabilities.
func (s *Server) Source(id string) (reconcile.Source, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.sources[id]
	if src == nil {
		return reconcile.Source{}, false
	}
	out := reconcile.Source{ID: id, SessionID: src.session, Streams: slices.Clone(src.spec.Streams),
		Publishable: src.spec.Publishable, Recordable: src.spec.Recordable, Profiles: slices.Clone(src.spec.Profiles)}
	for _, v := range src.variants {
		out.Variants = append(out.Variants, *v)
	}
	return out, true
}

// Calls returns every command received so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Binding is a live publication or subscription.
type Binding struct {
	ID        string
	Principal string
	SourceID  string
	Session   string
	VariantID string
	Publish   bool
}

// Bindings returns the live publications and subscriptions, by ID.
func (s *Server) Bindings() []Binding {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Binding
	for _, b := range s.bindings {
		out = append(out, Binding{ID: b.id, Principal: b.principal, SourceID: b.sourceID, Session: b.session, VariantID: b.variant, Publish: b.publish})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// EndPrincipal ends every binding of a principal, as the server does when
// that principal's media session goes away (a crashed worker).
func (s *Server) EndPrincipal(principal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, b := range s.bindings {
		if b.principal == principal {
			s.dropBindingLocked(id)
		}
	}
	s.changedLocked()
}

// dropBindingLocked removes a binding and, for a publication, the output
// variant it produced.
func (s *Server) dropBindingLocked(id string) {
	b := s.bindings[id]
	s.deleteBindingLocked(id)
	if b == nil || !b.publish {
		return
	}
	if src := s.sources[b.sourceID]; src != nil {
		s.removeVariantLocked(src, func(v *reconcile.Variant) bool { return v.ID == b.variant && v.Owner == b.principal })
	}
}

// removeVariantLocked withdraws the variants of src that match, ending the
// subscriptions to them.
func (s *Server) removeVariantLocked(src *source, match func(*reconcile.Variant) bool) {
	for _, v := range src.variants {
		if !match(v) {
			continue
		}
		for id, sub := range s.bindings {
			if !sub.publish && sub.session == src.session && sub.variant == v.ID {
				s.deleteBindingLocked(id)
			}
		}
	}
	src.variants = slices.DeleteFunc(src.variants, match)
}

// RemoveVariant withdraws a variant of source id that no publication of
// this server produces (one advertised by the source, or by a publisher
// outside the simulation), ending the subscriptions to it.
func (s *Server) RemoveVariant(id, variantID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := s.sourceLocked(id)
	if err != nil {
		return err
	}
	s.removeVariantLocked(src, func(v *reconcile.Variant) bool { return v.ID == variantID })
	s.changedLocked()
	return nil
}

// AddGroup creates a group that admits the given principals on Join.
func (s *Server) AddGroup(id string, admits ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &group{admits: map[string]bool{}, members: map[string]bool{}}
	for _, p := range admits {
		g.admits[p] = true
	}
	s.groups[id] = g
}

// JoinRefusedError is a Join the group does not admit.
type JoinRefusedError struct{ Group, Principal string }

// Error names the group and the principal.
func (e *JoinRefusedError) Error() string {
	return fmt.Sprintf("mediasim: group %q does not admit %q", e.Group, e.Principal)
}

// Join is a group join by principal; membership exists only after it
// succeeds.
func (s *Server) Join(principal, groupID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil || !g.admits[principal] {
		return &JoinRefusedError{Group: groupID, Principal: principal}
	}
	g.members[principal] = true
	return nil
}

// GroupState is a group's authoritative control state.
type GroupState struct {
	Group   string
	Members []string
}

// GroupState returns the group's members, as granted by joins.
func (s *Server) GroupState(groupID string) GroupState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := GroupState{Group: groupID}
	if g := s.groups[groupID]; g != nil {
		for m := range g.members {
			st.Members = append(st.Members, m)
		}
		sort.Strings(st.Members)
	}
	return st
}

// Client returns the media commands of one principal.
func (s *Server) Client(principal string) *Client { return &Client{s: s, principal: principal} }

// Client is one principal's media command channel; it implements
// reconcile.Media.
type Client struct {
	s         *Server
	principal string
}

func (c *Client) log(call Call) error {
	call.Principal = c.principal
	c.s.calls = append(c.s.calls, call)
	return call.Err
}

func pubErr(code reconcile.ErrorCode, format string, a ...any) error {
	return &reconcile.CommandError{Command: "StartPublication", Code: code, Message: fmt.Sprintf(format, a...)}
}

// currentLocked returns the source whose current session is session.
func (s *Server) currentLocked(session string) *source {
	for _, src := range s.sources {
		if src.session == session {
			return src
		}
	}
	return nil
}

// StartPublication implements reconcile.Media.
func (c *Client) StartPublication(_ context.Context, req reconcile.PublicationRequest) (reconcile.Binding, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	call := Call{Command: "StartPublication", Pub: req}
	src := s.currentLocked(req.SourceSessionID)
	var owner string
	if src != nil {
		for _, v := range src.variants {
			if v.ID == req.VariantID {
				owner = v.Owner
			}
		}
	}
	switch {
	case !req.RecordingMode.Valid():
		call.Err = pubErr(reconcile.PublicationRecordingModeInvalid, "recording_mode %q", string(req.RecordingMode))
	case src == nil:
		call.Err = pubErr(reconcile.PublicationSourceUnavailable, "no source session %q", req.SourceSessionID)
	case req.Group != "" && !s.isMemberLocked(req.Group, c.principal):
		call.Err = pubErr(reconcile.PublicationPermissionDenied, "%s is not a member of group %q", c.principal, req.Group)
	case !src.spec.Publishable:
		call.Err = pubErr(reconcile.PublicationUnsupported, "source %q does not allow publication", src.id)
	case req.RecordingMode == intent.RecordingRequired && !src.spec.Recordable:
		call.Err = pubErr(reconcile.PublicationUnsupported, "source %q cannot record", src.id)
	case !slices.ContainsFunc(src.spec.Profiles, func(p reconcile.Profile) bool { return p.ID == req.OutputProfile }):
		call.Err = pubErr(reconcile.PublicationUnsupported, "output profile %q", req.OutputProfile)
	case owner != "":
		call.Err = pubErr(reconcile.PublicationConflict, "variant %q is owned by %s", req.VariantID, owner)
	}
	if call.Err != nil {
		return reconcile.Binding{}, c.log(call)
	}
	prof, _ := src.Profile(req.OutputProfile)
	id := s.nextID("pub")
	src.variants = append(src.variants, &reconcile.Variant{ID: req.VariantID, MediaKind: req.MediaKind, Codec: prof.Codec, Owner: c.principal})
	s.bindings[id] = &bindingRec{id: id, principal: c.principal, sourceID: src.id, session: src.session, variant: req.VariantID, publish: true}
	call.ID = id
	s.changedLocked()
	return reconcile.Binding{ID: id, VariantID: req.VariantID}, c.log(call)
}

// Profile returns one of the source's output profiles.
func (src *source) Profile(id string) (reconcile.Profile, bool) {
	for _, p := range src.spec.Profiles {
		if p.ID == id {
			return p, true
		}
	}
	return reconcile.Profile{}, false
}

func (s *Server) isMemberLocked(groupID, principal string) bool {
	g := s.groups[groupID]
	return g != nil && g.members[principal]
}

// StopPublication implements reconcile.Media.
func (c *Client) StopPublication(_ context.Context, id string) error {
	return c.stop("StopPublication", id, true, reconcile.PublicationNotFound)
}

// Unsubscribe implements reconcile.Media.
func (c *Client) Unsubscribe(_ context.Context, id string) error {
	return c.stop("Unsubscribe", id, false, reconcile.SubscribeNotFound)
}

func (c *Client) stop(command, id string, publish bool, notFound reconcile.ErrorCode) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	call := Call{Command: command, ID: id}
	b := s.bindings[id]
	if b == nil || b.principal != c.principal || b.publish != publish {
		call.Err = &reconcile.CommandError{Command: command, Code: notFound, Message: fmt.Sprintf("no binding %q of %s", id, c.principal)}
		return c.log(call)
	}
	s.dropBindingLocked(id)
	s.changedLocked()
	return c.log(call)
}

// Subscribe implements reconcile.Media. An empty VariantID selects the
// ready variant of the kind with the smallest ID.
func (c *Client) Subscribe(_ context.Context, req reconcile.SubscribeRequest) (reconcile.Binding, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	call := Call{Command: "Subscribe", Sub: req}
	fail := func(code reconcile.ErrorCode, format string, a ...any) (reconcile.Binding, error) {
		call.Err = &reconcile.CommandError{Command: "Subscribe", Code: code, Message: fmt.Sprintf(format, a...)}
		return reconcile.Binding{}, c.log(call)
	}
	src := s.currentLocked(req.SourceSessionID)
	if src == nil {
		return fail(reconcile.SubscribeSourceUnavailable, "no source session %q", req.SourceSessionID)
	}
	var chosen *reconcile.Variant
	for _, v := range src.variants {
		if !v.Ready || v.MediaKind != req.MediaKind {
			continue
		}
		if req.VariantID == v.ID || (req.VariantID == "" && (chosen == nil || v.ID < chosen.ID)) {
			chosen = v
		}
	}
	if chosen == nil {
		return fail(reconcile.SubscribeVariantUnavailable, "no ready %s variant %q", req.MediaKind, req.VariantID)
	}
	id := s.nextID("sub")
	s.bindings[id] = &bindingRec{id: id, principal: c.principal, sourceID: src.id, session: src.session, variant: chosen.ID}
	s.frames[id] = &frameStream{ch: make(chan cv.Frame, FrameBuffer)}
	call.ID = id
	return reconcile.Binding{ID: id, VariantID: chosen.ID}, c.log(call)
}
