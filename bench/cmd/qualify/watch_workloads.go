package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

const (
	nameWatchFanout      = report.WatchFanout
	nameOneEntrySnapshot = report.OneEntrySnapshot
)

// countingSink is a successful enqueue callback: it counts updates and
// closures and signals when the awaited count is reached.
type countingSink struct {
	updates, closed *atomic.Int64
	target          *atomic.Int64
	reached         chan struct{}
}

func (c countingSink) Deliver(m watch.Message) error {
	switch m := m.(type) {
	case *watch.Update:
		if c.updates.Add(1) == c.target.Load() {
			c.reached <- struct{}{}
		}
	case *watch.Closed:
		if m.Reason == watch.BufferOverflow && c.closed.Add(1) == c.target.Load() {
			c.reached <- struct{}{}
		}
	}
	return nil
}

// runWatchFanout is the specification's fan-out workload: 1,024 watches
// across 127 sessions, 30 rounds of one matching write each, timed from the
// write's call until every watch's update reached its sink. Nothing is
// acknowledged, so each watch then holds 30 pending updates; three more
// writes must close all 1,024 with BUFFER_OVERFLOW (32 held, the 33rd
// closes), which is verified.
func runWatchFanout(env *Env) ([]harness.Result, error) {
	// The journal skips fsync here: the round time is the registry's
	// fan-out, not the disk (durable_cas measures that).
	s, err := openScratch(env, nameWatchFanout, statestore.Options{NoSync: true, Limits: fanoutLimits})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	const sessions, watches, rounds = fanoutSessions, fanoutWatches, fanoutRoundCount
	var updates, closed, target atomic.Int64
	reached := make(chan struct{}, 1)
	sink := countingSink{&updates, &closed, &target, reached}
	admin := statestore.Principal{ID: "coordinator", Admin: true}
	var ss []*statestore.Session
	for i := 0; i < sessions; i++ {
		sess, err := s.OpenSession(admin, sink)
		if err != nil {
			return nil, err
		}
		ss = append(ss, sess)
	}
	ctx := context.Background()
	for w := 0; w < watches; w++ {
		if _, err := s.Watch(ctx, ss[w%sessions], statestore.WatchRequest{WatchID: fmt.Sprintf("w%d", w), Namespace: "service/fanout", KeyPrefix: "intents/"}); err != nil {
			return nil, err
		}
	}
	doc := testdoc.MediaIntent(harness.DocBytes, 1)
	put := func() error {
		_, err := s.Put(ctx, admin, statestore.PutRequest{Namespace: "service/fanout", Key: "intents/front-door", Schema: schema.MediaIntentV1, Document: doc})
		return err
	}
	wait := func(what string) error {
		select {
		case <-reached:
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s: %d updates delivered, %d watches closed with BUFFER_OVERFLOW", what, updates.Load(), closed.Load())
		}
	}
	lat, err := fanoutRounds(env.Run, nameWatchFanout, put, wait, &target, &updates)
	if err != nil {
		return nil, err
	}
	r := harness.Result{Name: nameWatchFanout, Writers: 1, Note: fmt.Sprintf("watches=%d sessions=%d rounds=%d; %d closed with BUFFER_OVERFLOW at the 33rd", watches, sessions, rounds, closed.Load())}
	lat.Fill(&r)
	return []harness.Result{r}, nil
}

// fanoutRounds is the measured part of the fan-out workloads, with the
// fixed sizes of the specification's (fanoutWatches watches, fanoutRounds
// rounds): each round sets target to the update count that completes it,
// writes with put and waits (wait returns once the counter that target
// watches reaches it), timed from the write's call. Then target becomes the
// number of watches and three more writes must close each one with
// BUFFER_OVERFLOW (32 held, the 33rd closes). updates counts delivered
// updates.
func fanoutRounds(run harness.Runner, name string, put func() error, wait func(what string) error, target, updates *atomic.Int64) (*harness.Latencies, error) {
	lat := harness.NewLatencies(fanoutRoundCount)
	for r := 1; r <= fanoutRoundCount; r++ {
		target.Store(int64(r * fanoutWatches))
		start := time.Now()
		if err := put(); err != nil {
			return nil, err
		}
		if err := wait(fmt.Sprintf("round %d", r)); err != nil {
			return nil, err
		}
		took := time.Since(start)
		lat.Record(took)
		if err := run.Check(name, -1, r-1, took); err != nil {
			return nil, err
		}
	}
	target.Store(fanoutWatches)
	for i := 0; i < 3; i++ {
		if err := put(); err != nil {
			return nil, err
		}
	}
	if err := wait("overflow"); err != nil {
		return nil, err
	}
	// Updates 31 and 32 may or may not have reached a sink before the
	// 33rd closed the watch (closing drops what is still queued).
	const least = fanoutRoundCount * fanoutWatches
	if got := updates.Load(); got < least || got > least+2*fanoutWatches {
		return nil, fmt.Errorf("%d updates delivered, want %d to %d", got, least, least+2*fanoutWatches)
	}
	return lat, nil
}

// The fan-out workloads' sizes (the specification's full-capacity run).
const fanoutSessions, fanoutWatches, fanoutRoundCount = 127, 1024, 30

// fanoutLimits lets the fan-out's one principal hold all 1,024 watches:
// the per-principal quota's default is a quarter of the store's watches.
var fanoutLimits = quota.Limits{MaxWatchesPerPrincipal: fanoutWatches}

// runOneEntrySnapshot times WatchState on a prefix holding one entry (the
// watch is removed again after each).
func runOneEntrySnapshot(env *Env) ([]harness.Result, error) {
	s, err := openScratch(env, nameOneEntrySnapshot, statestore.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	owner := statestore.Principal{ID: "owner-001"}
	ctx := context.Background()
	if _, err := s.Put(ctx, owner, statestore.PutRequest{Namespace: "user/owner-001", Key: "intents/front-door", Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(harness.DocBytes, 1)}); err != nil {
		return nil, err
	}
	var delivered atomic.Int64
	sess, err := s.OpenSession(owner, sinkFunc(func(watch.Message) error { delivered.Add(1); return nil }))
	if err != nil {
		return nil, err
	}
	lat := harness.NewLatencies(env.Ops)
	for i := 0; i < env.Ops; i++ {
		start := time.Now()
		res, err := s.Watch(ctx, sess, statestore.WatchRequest{WatchID: "w", Namespace: "user/owner-001", KeyPrefix: "intents/"})
		took := time.Since(start)
		lat.Record(took)
		if err != nil {
			return nil, err
		}
		if err := env.Run.Check(nameOneEntrySnapshot, -1, i, took); err != nil {
			return nil, err
		}
		if len(res.Entries) != 1 {
			return nil, fmt.Errorf("snapshot holds %d entries", len(res.Entries))
		}
		if err := s.Unwatch(sess, "w"); err != nil {
			return nil, err
		}
	}
	r := harness.Result{Name: nameOneEntrySnapshot, Writers: 1, Note: "WatchState: capture + register (Unwatch untimed)"}
	lat.Fill(&r)
	return []harness.Result{r}, nil
}

type sinkFunc func(watch.Message) error

func (f sinkFunc) Deliver(m watch.Message) error { return f(m) }
