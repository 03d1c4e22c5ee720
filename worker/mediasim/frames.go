package mediasim

import (
	"context"
	"fmt"
	"slices"

	"github.com/keeppeek/statestore/worker/cv"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// The media data a computer-vision worker needs, in process only (a
// Remote implements neither): the frames of each subscription, and the
// event catalog and router it publishes events to.

var (
	_ cv.Capabilities = (*Server)(nil)
	_ cv.Media        = (*Client)(nil)
)

// FrameBuffer is how many frames a subscription holds that its subscriber
// has not read; EmitFrames drops the ones beyond, as a media server drops
// frames for a slow consumer rather than buffering without bound.
const FrameBuffer = 256

// frameStream is one subscription's frames: numbered from 1, closed when
// the subscription ends.
type frameStream struct {
	ch   chan cv.Frame
	sent uint64
}

// deleteBindingLocked ends a binding, and with a subscription its frames.
func (s *Server) deleteBindingLocked(id string) {
	delete(s.bindings, id)
	if fs := s.frames[id]; fs != nil {
		close(fs.ch)
		delete(s.frames, id)
	}
}

// EmitFrames has source id produce n frames: each live subscription to its
// current session receives them, in order, numbered on from its last. It
// returns how many frames were delivered in all; frames that found a
// subscription's buffer full (FrameBuffer) are dropped.
func (s *Server) EmitFrames(id string, n int) (delivered int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := s.sourceLocked(id)
	if err != nil {
		return 0, err
	}
	var subs []string
	for bid, b := range s.bindings {
		if !b.publish && b.session == src.session {
			subs = append(subs, bid)
		}
	}
	slices.Sort(subs)
	for _, bid := range subs {
		fs := s.frames[bid]
		for range n {
			fs.sent++
			select {
			case fs.ch <- cv.Frame{Seq: fs.sent, SessionID: src.session}:
				delivered++
			default:
			}
		}
	}
	return delivered, nil
}

// ModelProfiles implements cv.Capabilities: the model profiles source id
// advertised when it connected, none while it has no session.
func (s *Server) ModelProfiles(id string) []cv.ModelProfile {
	s.mu.Lock()
	defer s.mu.Unlock()
	if src := s.sources[id]; src != nil {
		return slices.Clone(src.spec.Models)
	}
	return nil
}

// Frames implements cv.Media: the frames of a live subscription of this
// principal, closed when it ends.
func (c *Client) Frames(subscriptionID string) (<-chan cv.Frame, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bindings[subscriptionID]
	if b == nil || b.publish || b.principal != c.principal {
		return nil, &reconcile.CommandError{Command: "Frames", Code: reconcile.SubscribeNotFound, Message: fmt.Sprintf("no subscription %q of %s", subscriptionID, c.principal)}
	}
	return s.frames[subscriptionID].ch, nil
}

// CatalogEvent is one event the simulated event catalog received.
type CatalogEvent struct {
	Principal string
	Schema    string
	Document  []byte
}

// PublishEvent implements cv.Media: the simulated event catalog keeps
// every event exactly as it arrives, checking nothing, so a test sees
// precisely what a worker published.
func (c *Client) PublishEvent(_ context.Context, schemaName string, doc []byte) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, CatalogEvent{Principal: c.principal, Schema: schemaName, Document: slices.Clone(doc)})
	return nil
}

// Events returns every event the catalog received, in arrival order.
func (s *Server) Events() []CatalogEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}
