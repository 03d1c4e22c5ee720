package intent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/stateclient"
)

// MaxUpdateAttempts bounds Update's reread-and-retry loop: a key that
// changes under every attempt is contended beyond what a retry fixes.
const MaxUpdateAttempts = 8

// ContendedError is an Update that lost compare-and-set on every attempt.
type ContendedError struct {
	Namespace, Key string
	Attempts       int
	Err            error // the last CONFLICT
}

// Error names the key and the attempts.
func (e *ContendedError) Error() string {
	return fmt.Sprintf("intent %s/%s: lost compare-and-set %d times", e.Namespace, e.Key, e.Attempts)
}

// Unwrap returns the last CONFLICT.
func (e *ContendedError) Unwrap() error { return e.Err }

// Update is the specification's writer discipline: read the current
// intent, merge this writer's own change into it, and write it back with
// compare-and-set on the revision read (create-only when the key is
// absent). A writer that loses rereads and merges again; it never falls
// back to a blind write, which would discard the other writer's state.
//
// ttl is the TTL to write: zero for a durable intent, or a liveness lease
// its owner keeps refreshing (when it stops, the intent EXPIREs and workers
// stop acting on it).
//
// merge receives the current intent (exists false: none) and returns the
// intent to write; an error from merge stops the update and is returned.
func Update(ctx context.Context, c stateclient.Client, reg *schema.Registry, namespace, key string, ttl time.Duration,
	merge func(cur Intent, exists bool) (Intent, error)) (statestore.Entry, error) {
	var last error
	for attempt := 0; attempt < MaxUpdateAttempts; attempt++ {
		var (
			cur    Intent
			exists bool
			expect = statestore.CreateOnly
		)
		e, err := c.Get(ctx, namespace, key)
		switch {
		case err == nil:
			if cur, err = Parse(reg, e.Document); err != nil {
				return statestore.Entry{}, err
			}
			exists, expect = true, statestore.IfRevision(e.Revision)
		case !errors.Is(err, statestore.ErrNotFound):
			return statestore.Entry{}, err
		}
		next, err := merge(cur, exists)
		if err != nil {
			return statestore.Entry{}, err
		}
		doc, err := Encode(reg, next)
		if err != nil {
			return statestore.Entry{}, err
		}
		put, err := c.Put(ctx, statestore.PutRequest{Namespace: namespace, Key: key, Schema: Schema, Document: doc, Expect: expect, TTL: ttl})
		if !errors.Is(err, statestore.ErrConflict) {
			return put, err
		}
		last = err
	}
	return statestore.Entry{}, &ContendedError{Namespace: namespace, Key: key, Attempts: MaxUpdateAttempts, Err: last}
}
