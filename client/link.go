package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
	"github.com/keeppeek/statestore/worker/stateclient"
)

// Linked is the client as the worker kit sees a control channel: its Get,
// Put and Delete are the Client's, and Watch, Unwatch and Ack are the raw
// WatchState, UnwatchState and WatchStateAck calls, with exactly the
// semantics of stateclient.Local. So it is a reconcile.Conn (a
// stateclient.Client and a watchcache.Source) for worker/reconcile,
// worker/lease and worker/watchcache.
//
// Every message of its watches reaches the Link's Deliver as a
// *watch.Snapshot, *watch.Update or *watch.Closed, in arrival order, from
// one goroutine of its own (the connection's reader only queues, so a
// Deliver that calls Ack does not wait for itself). The Link hears
// Disconnected once a connection dropped, after that connection's last
// message, and Reconnected once a new connection is up (the watches died
// with the old session, so it re-watches then). A Deliver error ends that
// watch as the store's registry would: it is unwatched and the Link gets
// its *watch.Closed (SNAPSHOT_DELIVERY_FAILED or BUFFER_OVERFLOW).
//
// The queue between the reader and the Link holds what the server sent and
// the Link has not taken: for each watch at most its snapshot, its
// unacknowledged updates (the server's bound) and its closure.
type Linked struct {
	c    *Client
	l    stateclient.Link
	wake chan struct{} // signalled by push
	quit chan struct{} // closed by halt
	done chan struct{} // closed when run returns
	once sync.Once

	mu    sync.Mutex
	queue []linkItem
	// up is guarded by c.mu: whether the Link was last told the
	// connection is up (or was connected when it was made).
	up bool
}

// linkItem is one thing to tell the Link.
type linkItem struct {
	msg          watch.Message
	route        *linkRoute // the watch msg belongs to
	disconnected bool
	reconnected  bool
}

// Link returns l's view of the client. l must enqueue and return (as
// reconcile.Reconciler does); it is called from one goroutine per Linked.
// A Link made while the client is reconnecting hears Reconnected once the
// connection is up. Linked.Close, or Client.Close, ends the deliveries.
func (c *Client) Link(l stateclient.Link) *Linked {
	if l == nil {
		panic("client: Link(nil): a Linked needs a stateclient.Link to deliver to")
	}
	k := &Linked{c: c, l: l, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		close(k.done)
		k.halt()
		return k
	}
	k.up = c.cur != nil
	c.links = append(c.links, k)
	c.wg.Add(1)
	go k.run()
	return k
}

// push queues it for the Link.
func (k *Linked) push(it linkItem) {
	k.mu.Lock()
	k.queue = append(k.queue, it)
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// run tells the Link what was queued, in order, until halted.
func (k *Linked) run() {
	defer k.c.wg.Done()
	defer close(k.done)
	// failed holds the watches whose Deliver failed: the rest of their
	// messages go nowhere, as after a closure. A route is one WatchState,
	// so a later watch under the same id is not mistaken for it.
	failed := map[*linkRoute]bool{}
	for {
		select {
		case <-k.quit:
			return
		case <-k.wake:
		}
		for {
			k.mu.Lock()
			items := k.queue
			k.queue = nil
			k.mu.Unlock()
			if len(items) == 0 {
				break
			}
			for _, it := range items {
				select {
				case <-k.quit:
					return
				default:
				}
				switch {
				case it.disconnected:
					clear(failed)
					k.l.Disconnected()
				case it.reconnected:
					k.l.Reconnected()
				default:
					k.deliver(it, failed)
				}
			}
		}
	}
}

// deliver hands one watch message to the Link; a refusal closes the watch
// as the store's registry does when its Sink refuses.
func (k *Linked) deliver(it linkItem, failed map[*linkRoute]bool) {
	if failed[it.route] {
		return
	}
	err := k.l.Deliver(it.msg)
	reason := watch.BufferOverflow
	switch it.msg.(type) {
	case *watch.Closed:
		return // the watch's last message, offered once (best effort)
	case *watch.Snapshot:
		reason = watch.SnapshotDeliveryFailed
	}
	if err == nil {
		return
	}
	failed[it.route] = true
	it.route.cn.forget(it.route.id)
	k.l.Deliver(&watch.Closed{WatchID: it.route.id, Reason: reason, Message: "the Link refused a message: " + err.Error()})
}

// halt stops the deliveries.
func (k *Linked) halt() { k.once.Do(func() { close(k.quit) }) }

// Close stops the deliveries and unwatches, best effort, the watches this
// Linked opened on the current connection; the Client stays open. It must
// not be called from the Link's own methods (it waits for them to
// return).
func (k *Linked) Close() error {
	c := k.c
	c.mu.Lock()
	for i, x := range c.links {
		if x == k {
			c.links = append(c.links[:i], c.links[i+1:]...)
			break
		}
	}
	cn := c.cur
	c.mu.Unlock()
	k.halt()
	<-k.done
	if cn != nil {
		cn.mu.Lock()
		var ids []string
		for id, r := range cn.routes {
			if lr, ok := r.(*linkRoute); ok && lr.k == k {
				ids = append(ids, id)
			}
		}
		cn.mu.Unlock()
		for _, id := range ids {
			cn.forget(id)
		}
	}
	return nil
}

// Get reads an entry, as Client.Get.
func (k *Linked) Get(ctx context.Context, namespace, key string) (statestore.Entry, error) {
	return k.c.Get(ctx, namespace, key)
}

// Put writes an entry, as Client.Put.
func (k *Linked) Put(ctx context.Context, req statestore.PutRequest) (statestore.Entry, error) {
	return k.c.Put(ctx, req)
}

// Delete removes an entry, as Client.Delete.
func (k *Linked) Delete(ctx context.Context, req statestore.DeleteRequest) (uint64, error) {
	return k.c.Delete(ctx, req)
}

// Watch registers a watch (WatchState) on the current connection and
// returns its snapshot, which the Link also receives as the watch's first
// message. Without a connection it fails at once with UNAVAILABLE (field
// "connection"), as stateclient.Local does: the Link re-watches when it
// hears Reconnected.
func (k *Linked) Watch(watchID, namespace, prefix string) (uint64, []*materialize.Entry, error) {
	if k.halted() {
		return 0, nil, ErrClosed
	}
	cn, err := k.c.connected()
	if err != nil {
		return 0, nil, err
	}
	r := &linkRoute{k: k, cn: cn, id: watchID, namespace: namespace, prefix: prefix}
	res, err := k.rawCall(cn, func(id uint64) *pb.ClientMessage {
		return &pb.ClientMessage{Message: &pb.ClientMessage_WatchState{WatchState: &pb.WatchState{
			RequestId: id, WatchId: watchID, Namespace: namespace, KeyPrefix: prefix}}}
	}, r, watchID)
	if err != nil {
		return 0, nil, err
	}
	snap := res.GetWatch()
	if snap == nil {
		return 0, nil, unexpected("WatchState", res)
	}
	s := wire.StoreSnapshot(snap, res.GetRequestId(), namespace, prefix)
	return s.SnapshotRevision, s.Entries, nil
}

// Unwatch removes a watch (UnwatchState); nothing more of it reaches the
// Link.
func (k *Linked) Unwatch(watchID string) error {
	cn, err := k.c.connected()
	if err != nil {
		return err
	}
	cn.dropRoute(watchID)
	_, err = k.rawCall(cn, func(id uint64) *pb.ClientMessage {
		return &pb.ClientMessage{Message: &pb.ClientMessage_UnwatchState{UnwatchState: &pb.UnwatchState{RequestId: id, WatchId: watchID}}}
	}, nil, "")
	return err
}

// Ack acknowledges the highest contiguously applied sequence of a watch
// (WatchStateAck).
func (k *Linked) Ack(watchID string, applied uint64) error {
	cn, err := k.c.connected()
	if err != nil {
		return err
	}
	rep, err := k.rawReply(cn, func(id uint64) *pb.ClientMessage {
		return &pb.ClientMessage{Message: &pb.ClientMessage_WatchStateAck{WatchStateAck: &pb.WatchStateAck{
			RequestId: id, WatchId: watchID, AppliedSequence: applied}}}
	}, nil, "")
	switch {
	case err != nil:
		return err
	case rep.ack != nil:
		return nil
	}
	_, err = rep.result()
	if err == nil {
		err = &statestore.Error{Code: statestore.Unavailable, Field: "answer",
			Message: fmt.Sprintf("the server answered WatchStateAck for %q with a StateStoreResult", watchID)}
	}
	return err
}

func (k *Linked) halted() bool {
	select {
	case <-k.quit:
		return true
	default:
		return false
	}
}

// rawCall is one watch call on cn within RequestTimeout, without waiting
// for another connection.
func (k *Linked) rawCall(cn *conn, build func(id uint64) *pb.ClientMessage, r route, watchID string) (*pb.StateStoreResult, error) {
	rep, err := k.rawReply(cn, build, r, watchID)
	if err != nil {
		return nil, err
	}
	return rep.result()
}

func (k *Linked) rawReply(cn *conn, build func(id uint64) *pb.ClientMessage, r route, watchID string) (reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), k.c.cfg.RequestTimeout)
	defer cancel()
	rep, err := cn.call(ctx, nil, build, r, watchID)
	if errors.Is(err, errConnEnded) {
		_, err = k.c.connected() // the connection ended just now
		if err == nil {
			err = &statestore.Error{Code: statestore.Unavailable, Field: "connection", Message: "the connection ended before the request was sent"}
		}
	}
	return rep, err
}

// linkRoute carries one watch of a Linked on one connection.
type linkRoute struct {
	k         *Linked
	cn        *conn
	id        string
	namespace string
	prefix    string
}

func (r *linkRoute) snapshot(requestID uint64, m *pb.StateStoreWatchSnapshot) {
	r.k.push(linkItem{msg: wire.StoreSnapshot(m, requestID, r.namespace, r.prefix), route: r})
}

func (r *linkRoute) update(m *pb.StateStoreWatchUpdate) {
	r.k.push(linkItem{msg: wire.StoreUpdate(m, r.namespace), route: r})
}

func (r *linkRoute) closed(m *pb.StateStoreWatchClosed) {
	r.k.push(linkItem{msg: wire.StoreClosed(m), route: r})
}

// lost: the Linked hears Disconnected once, for all its watches.
func (r *linkRoute) lost() {}
