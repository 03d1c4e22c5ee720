package watchcache_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/worker/watchcache"
)

// regStore is a store in miniature on a real watch.Registry: one
// commit-order lock around snapshot+Add and around commit+Publish.
type regStore struct {
	mu   sync.Mutex
	rev  uint64
	data map[string]*materialize.Entry
	reg  *watch.Registry
	sess *watch.Session
}

func (s *regStore) Watch(id, namespace, prefix string) (uint64, []*materialize.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var entries []*materialize.Entry
	for k, e := range s.data {
		if strings.HasPrefix(k, prefix) {
			entries = append(entries, e)
		}
	}
	if err := s.reg.Add(s.sess, 0, id, namespace, prefix, s.rev, entries); err != nil {
		return 0, nil, err
	}
	return s.rev, entries, nil
}

func (s *regStore) Unwatch(id string) error             { return s.reg.Remove(s.sess, id) }
func (s *regStore) Ack(id string, applied uint64) error { return s.reg.Ack(s.sess, id, applied) }

func (s *regStore) write(key string, del bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if del && s.data[key] == nil {
		return
	}
	s.rev++
	ev := watch.Event{Revision: s.rev, Namespace: ns, Key: key, Kind: watch.Delete}
	if del {
		delete(s.data, key)
	} else {
		ev.Kind = watch.Put
		ev.Entry = &materialize.Entry{Namespace: ns, Key: key, Revision: s.rev}
		s.data[key] = ev.Entry
	}
	s.reg.Publish([]watch.Event{ev})
}

// routeSink is the embedder's routing: every message of the session goes
// to the cache, on the session's delivery goroutine (Source calls here do
// not need that goroutine, so Handle may run on it).
type routeSink struct {
	cache   atomic.Pointer[watchcache.Cache]
	handled chan struct{}
	mu      sync.Mutex
	errs    []error
}

func (r *routeSink) Deliver(m watch.Message) error {
	if c := r.cache.Load(); c != nil {
		if err := c.Handle(m); err != nil && !errors.Is(err, watchcache.ErrAck) {
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
		}
	}
	select {
	case r.handled <- struct{}{}:
	default:
	}
	return nil
}

// End to end with the real registry, under concurrent writes, a restore
// (every watch Closed) and buffer overflows from a writer outpacing the
// cache: the cache always ends equal to the store.
func TestWithRegistry(t *testing.T) {
	t.Parallel()
	reg := watch.NewRegistry(watch.Limits{MaxUnacked: 4}, clock.NewFake(time.Unix(0, 0)))
	defer reg.Stop()
	sink := &routeSink{handled: make(chan struct{}, 1)}
	st := &regStore{data: map[string]*materialize.Entry{}, reg: reg, sess: reg.OpenSession("worker", sink)}
	for i := 0; i < 5; i++ {
		st.write(fmt.Sprintf("intents/%d", i), false)
	}
	c := watchcache.New(st, ns, "intents/", watchcache.WithWatchID("intents"))
	sink.cache.Store(c)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		if i == 1500 {
			reg.CloseAll(watch.Restored)
		}
		prefix := "intents/"
		if rng.IntN(4) == 0 {
			prefix = "status/"
		}
		st.write(fmt.Sprintf("%s%d", prefix, rng.IntN(10)), rng.IntN(3) == 0)
	}
	inSync := func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		n := 0
		for k, e := range st.data {
			if strings.HasPrefix(k, "intents/") {
				n++
				if got, ok := c.Get(k); !ok || got != e {
					return false
				}
			}
		}
		return len(c.Keys()) == n && c.Synced()
	}
	for !inSync() {
		select {
		case <-sink.handled:
		case <-time.After(10 * time.Second):
			t.Fatalf("cache never converged: keys %v, revision %d, store revision %d", c.Keys(), c.Revision(), st.rev)
		}
	}
	if c.Resnapshots() < 1 {
		t.Fatal("the restore did not cause a re-snapshot")
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.errs) != 0 {
		t.Fatalf("Handle errors: %v", sink.errs)
	}
	t.Logf("re-snapshots: %d", c.Resnapshots())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
