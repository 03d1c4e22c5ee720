package stateclient

import (
	"context"
	"errors"
	"sync"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
)

// Client is the GetState, PutState and DeleteState calls of one
// authenticated principal.
type Client interface {
	Get(ctx context.Context, namespace, key string) (statestore.Entry, error)
	Put(ctx context.Context, req statestore.PutRequest) (statestore.Entry, error)
	Delete(ctx context.Context, req statestore.DeleteRequest) (uint64, error)
}

// Bound is a Client making every call on one in-process store as one
// principal, with no control channel.
type Bound struct {
	Store     *statestore.Store
	Principal statestore.Principal
}

// As returns the Client of principal p on s.
func As(s *statestore.Store, p statestore.Principal) Bound { return Bound{s, p} }

// Get reads an entry as the principal.
func (b Bound) Get(ctx context.Context, namespace, key string) (statestore.Entry, error) {
	return b.Store.Get(ctx, b.Principal, namespace, key)
}

// Put writes an entry as the principal.
func (b Bound) Put(ctx context.Context, req statestore.PutRequest) (statestore.Entry, error) {
	return b.Store.Put(ctx, b.Principal, req)
}

// Delete removes an entry as the principal.
func (b Bound) Delete(ctx context.Context, req statestore.DeleteRequest) (uint64, error) {
	return b.Store.Delete(ctx, b.Principal, req)
}

// Link receives what arrives on a control channel: watch messages through
// Deliver (it is the session's watch.Sink, so it must enqueue and return),
// and the channel's loss and re-establishment.
type Link interface {
	watch.Sink
	Disconnected()
	Reconnected()
}

// ErrDisconnected is returned by watch calls while Local has no session.
var ErrDisconnected = &statestore.Error{Code: statestore.Unavailable, Field: "session", Message: "control channel disconnected"}

// Local is a principal's connection to an in-process store: a Client and
// a watchcache.Source over one session whose messages go to a Link.
type Local struct {
	p    statestore.Principal
	link Link

	mu   sync.Mutex
	s    *statestore.Store
	sess *statestore.Session
}

// Dial opens a session for p on s delivering to link.
func Dial(s *statestore.Store, p statestore.Principal, link Link) (*Local, error) {
	c := &Local{p: p, link: link}
	if err := c.connect(s); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Local) connect(s *statestore.Store) error {
	sess, err := s.OpenSession(c.p, c.link)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.s, c.sess = s, sess
	c.mu.Unlock()
	return nil
}

// Principal returns the principal every call is made as.
func (c *Local) Principal() statestore.Principal { return c.p }

func (c *Local) store() *statestore.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

func (c *Local) session() (*statestore.Store, *statestore.Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return nil, nil, ErrDisconnected
	}
	return c.s, c.sess, nil
}

// Get reads an entry as the principal.
func (c *Local) Get(ctx context.Context, namespace, key string) (statestore.Entry, error) {
	return As(c.store(), c.p).Get(ctx, namespace, key)
}

// Put writes an entry as the principal.
func (c *Local) Put(ctx context.Context, req statestore.PutRequest) (statestore.Entry, error) {
	return As(c.store(), c.p).Put(ctx, req)
}

// Delete removes an entry as the principal.
func (c *Local) Delete(ctx context.Context, req statestore.DeleteRequest) (uint64, error) {
	return As(c.store(), c.p).Delete(ctx, req)
}

// Watch implements watchcache.Source: WatchState on the current session.
func (c *Local) Watch(watchID, namespace, prefix string) (uint64, []*materialize.Entry, error) {
	s, sess, err := c.session()
	if err != nil {
		return 0, nil, err
	}
	res, err := s.Watch(context.Background(), sess, statestore.WatchRequest{WatchID: watchID, Namespace: namespace, KeyPrefix: prefix})
	if err != nil {
		return 0, nil, err
	}
	out := make([]*materialize.Entry, len(res.Entries))
	for i := range res.Entries {
		out[i] = &res.Entries[i]
	}
	return res.SnapshotRevision, out, nil
}

// Unwatch implements watchcache.Source.
func (c *Local) Unwatch(watchID string) error {
	s, sess, err := c.session()
	if err != nil {
		return err
	}
	return s.Unwatch(sess, watchID)
}

// Ack implements watchcache.Source.
func (c *Local) Ack(watchID string, applied uint64) error {
	s, sess, err := c.session()
	if err != nil {
		return err
	}
	return s.Ack(sess, watchID, applied)
}

// Drop loses the control channel, as a network failure would: the store
// removes the session's watches, and the Link hears Disconnected after the
// last message the session delivered. Dropping twice is a no-op.
func (c *Local) Drop() {
	if c.detach() {
		c.link.Disconnected()
	}
}

// Reconnect drops the current session, if any, and opens a new one on s (the
// same store, or the store reopened after a restart), then tells the Link.
func (c *Local) Reconnect(s *statestore.Store) error {
	c.Drop()
	if err := c.connect(s); err != nil {
		return errors.Join(ErrDisconnected, err)
	}
	c.link.Reconnected()
	return nil
}

// Close drops the session without telling the Link (the worker is going
// away, not losing its channel).
func (c *Local) Close() { c.detach() }

// detach closes the session and waits until its delivery goroutine stopped,
// so nothing it carried can reach the Link afterwards. It reports whether
// there was a session.
func (c *Local) detach() bool {
	c.mu.Lock()
	sess := c.sess
	c.sess = nil
	c.mu.Unlock()
	if sess == nil {
		return false
	}
	sess.Close()
	<-sess.Done()
	return true
}
