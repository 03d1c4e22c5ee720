package statestore_test

import (
	"bytes"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/worker/watchcache"
)

// storeSource adapts a store session to the client cache's Source, the way
// an embedder's protocol client would.
type storeSource struct {
	s  *statestore.Store
	ss *statestore.Session
}

func (src *storeSource) Watch(id, ns, prefix string) (uint64, []*materialize.Entry, error) {
	res, err := src.s.Watch(ctx, src.ss, statestore.WatchRequest{WatchID: id, Namespace: ns, KeyPrefix: prefix})
	if err != nil {
		return 0, nil, err
	}
	out := make([]*materialize.Entry, len(res.Entries))
	for i := range res.Entries {
		out[i] = &res.Entries[i]
	}
	return res.SnapshotRevision, out, nil
}

func (src *storeSource) Unwatch(id string) error       { return src.s.Unwatch(src.ss, id) }
func (src *storeSource) Ack(id string, n uint64) error { return src.s.Ack(src.ss, id, n) }

// routedSink hands messages to the cache from its own goroutine; drop, if
// set, loses a message as a faulty channel would.
type routedSink struct {
	mu      sync.Mutex
	drop    func(watch.Message) bool
	ch      chan watch.Message
	handled chan struct{}
}

func (r *routedSink) Deliver(m watch.Message) error {
	r.mu.Lock()
	drop := r.drop != nil && r.drop(m)
	r.mu.Unlock()
	if !drop {
		r.ch <- m
	}
	return nil
}

func startCache(t *testing.T, f *fixture, ns, prefix string) (*watchcache.Cache, *routedSink) {
	t.Helper()
	rs := &routedSink{ch: make(chan watch.Message, 1024), handled: make(chan struct{}, 1024)}
	ss, err := f.s.OpenSession(admin, rs)
	if err != nil {
		t.Fatal(err)
	}
	c := watchcache.New(&storeSource{s: f.s, ss: ss}, ns, prefix, watchcache.WithWatchID("cache"))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range rs.ch {
			c.Handle(m)
			rs.handled <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		ss.Close()
		<-ss.Done() // no Deliver is running: the channel can close
		close(rs.ch)
		<-done
	})
	return c, rs
}

// converge waits until the cache equals the store's entries under prefix.
func converge(t *testing.T, f *fixture, c *watchcache.Cache, rs *routedSink, ns string, keys []string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if reflect.DeepEqual(cacheState(c, keys), storeState(f, ns, keys)) && c.Revision() == f.s.Namespace(ns).Revision {
			return
		}
		select {
		case <-rs.handled:
		case <-deadline:
			t.Fatalf("cache never converged: cache %v store %v", cacheState(c, keys), storeState(f, ns, keys))
		}
	}
}

func cacheState(c *watchcache.Cache, keys []string) map[string]uint64 {
	m := map[string]uint64{}
	for _, k := range keys {
		if e, ok := c.Get(k); ok {
			m[k] = e.Revision
		}
	}
	return m
}

func storeState(f *fixture, ns string, keys []string) map[string]uint64 {
	m := map[string]uint64{}
	for _, k := range keys {
		if e, err := f.s.Get(ctx, admin, ns, k); err == nil {
			m[k] = e.Revision
		}
	}
	return m
}

func TestClientCacheRecovers(t *testing.T) {
	const ns = "service/worker"
	keys := []string{"intents/a", "intents/b", "intents/c"}
	t.Run("sequence gap", func(t *testing.T) {
		f := newFixture(t)
		f.mustPut(admin, ns, "intents/a", docN(0))
		c, rs := startCache(t, f, ns, "intents/")
		var seen int
		rs.mu.Lock()
		rs.drop = func(m watch.Message) bool {
			if _, ok := m.(*watch.Update); ok {
				seen++
				return seen == 3 // lose the third update
			}
			return false
		}
		rs.mu.Unlock()
		for i := 0; i < 8; i++ {
			f.mustPut(admin, ns, keys[i%3], docN(i))
		}
		f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: "intents/b"})
		converge(t, f, c, rs, ns, keys)
		if c.Resnapshots() < 1 {
			t.Fatal("the cache did not re-snapshot after the gap")
		}
	})
	t.Run("closure by restore", func(t *testing.T) {
		f := newFixture(t)
		f.mustPut(admin, ns, "intents/a", docN(0))
		var backup bytes.Buffer
		f.s.Backup(&backup)
		c, rs := startCache(t, f, ns, "intents/")
		f.mustPut(admin, ns, "intents/b", docN(1))
		// The cache holds intents/b before the restore, so only handling
		// the RESTORED close (and re-snapshotting) makes it converge:
		// otherwise it could look converged with the close still queued.
		converge(t, f, c, rs, ns, keys)
		if err := f.s.Restore(&backup); err != nil {
			t.Fatal(err)
		}
		converge(t, f, c, rs, ns, keys)
		if c.Resnapshots() < 1 || fmt.Sprint(c.Keys()) != "[intents/a]" {
			t.Fatalf("after restore: resnapshots %d keys %v", c.Resnapshots(), c.Keys())
		}
	})
}
