package lease

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/typeddoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/stateclient"
)

// Schema names the lease document.
const Schema = "keeppeek.worker-lease.v1"

//go:embed worker-lease.v1.json
var schemaJSON []byte

var codec = typeddoc.Codec[Document]{Name: Schema, JSONSchema: schemaJSON}

// RegisterSchema adds keeppeek.worker-lease.v1 to r.
func RegisterSchema(r *schema.Registry) error { return codec.Register(r) }

// Document is the lease entry's document.
type Document struct {
	Holder    string `json:"holder"`               // worker instance ID
	IntentKey string `json:"intent_key,omitempty"` // what the lease is for
}

// Defaults for Config.
const (
	DefaultTTL = 10 * time.Second
)

// Config names a lease and its timing.
type Config struct {
	Namespace string
	Key       string
	Holder    string // this worker instance's ID
	IntentKey string // written into the document, for operators
	// TTL of the entry; 0 means DefaultTTL. At least the store's minimum (1 s).
	TTL time.Duration
	// RenewEvery is the renewal period; 0 means TTL/3. Must be below TTL.
	RenewEvery time.Duration
	// Jitter is the most a renewal is brought forward; 0 means TTL/10,
	// negative means none.
	Jitter time.Duration
	// Rand returns a value in [0, n); nil means math/rand/v2.Int64N. Tests
	// fix it to make the schedule exact.
	Rand func(n int64) int64
}

// ConfigError is a Config that cannot make a lease, naming the field.
type ConfigError struct {
	Field  string
	Reason string
}

// Error names the field.
func (e *ConfigError) Error() string { return "lease config: " + e.Field + ": " + e.Reason }

// HeldError is a Claim that found the lease held.
type HeldError struct {
	Key      string
	Revision uint64 // the current revision (0: it vanished between calls)
	Err      error  // the store's CONFLICT
}

// Error names the key and its current revision.
func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %s held at revision %d", e.Key, e.Revision)
}

// Unwrap returns the store's error.
func (e *HeldError) Unwrap() error { return e.Err }

// ErrNotHeld is returned by Renew and Release on a lease this worker does
// not hold.
var ErrNotHeld = errors.New("lease: not held")

// LostError is a Renew or Release that found the entry no longer ours: it
// lapsed, was deleted, or another worker claimed it since.
type LostError struct {
	Key      string
	Revision uint64 // ours
	Current  uint64 // the store's (0: absent)
	Err      error
}

// Error names the key, our revision and the current one.
func (e *LostError) Error() string {
	return fmt.Sprintf("lease %s lost: held revision %d, current %d", e.Key, e.Revision, e.Current)
}

// Unwrap returns the store's error.
func (e *LostError) Unwrap() error { return e.Err }

// Lease is one worker's view of one lease key. It is not safe for
// concurrent use: one worker loop drives it.
type Lease struct {
	cfg  Config
	c    stateclient.Client
	doc  []byte
	held bool
	rev  uint64
	// renewAt is when the next renewal is due.
	renewAt time.Time
}

// New checks cfg and returns a lease not yet held. The registry must hold
// keeppeek.worker-lease.v1 (RegisterSchema).
func New(c stateclient.Client, reg *schema.Registry, cfg Config) (*Lease, error) {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.RenewEvery == 0 {
		cfg.RenewEvery = cfg.TTL / 3
	}
	if cfg.Jitter == 0 {
		cfg.Jitter = cfg.TTL / 10
	}
	if cfg.Jitter < 0 {
		cfg.Jitter = 0
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Int64N
	}
	switch {
	case cfg.Namespace == "":
		return nil, &ConfigError{"namespace", "required"}
	case cfg.Key == "":
		return nil, &ConfigError{"key", "required"}
	case cfg.TTL < time.Second:
		return nil, &ConfigError{"ttl", "below the store's 1 s minimum"}
	case cfg.RenewEvery <= 0 || cfg.RenewEvery >= cfg.TTL:
		return nil, &ConfigError{"renew_every", fmt.Sprintf("%v must be positive and below the TTL %v", cfg.RenewEvery, cfg.TTL)}
	case cfg.Jitter >= cfg.RenewEvery:
		return nil, &ConfigError{"jitter", fmt.Sprintf("%v must be below renew_every %v", cfg.Jitter, cfg.RenewEvery)}
	}
	doc, err := codec.Encode(reg, Document{Holder: cfg.Holder, IntentKey: cfg.IntentKey})
	if err != nil {
		return nil, err
	}
	return &Lease{cfg: cfg, c: c, doc: doc}, nil
}

// Key returns the lease's key.
func (l *Lease) Key() string { return l.cfg.Key }

// Held reports whether this worker holds the lease, as of its last write
// or observation.
func (l *Lease) Held() bool { return l.held }

// Revision returns the revision of this worker's last write (0 when not
// held).
func (l *Lease) Revision() uint64 { return l.rev }

// RenewAt returns when the next renewal is due (zero when not held).
func (l *Lease) RenewAt() time.Time { return l.renewAt }

func (l *Lease) put(ctx context.Context, x statestore.Expect) (statestore.Entry, error) {
	return l.c.Put(ctx, statestore.PutRequest{Namespace: l.cfg.Namespace, Key: l.cfg.Key, Schema: Schema, Document: l.doc, Expect: x, TTL: l.cfg.TTL})
}

func (l *Lease) schedule(now time.Time) {
	var early time.Duration
	if l.cfg.Jitter > 0 {
		early = time.Duration(l.cfg.Rand(int64(l.cfg.Jitter)))
	}
	l.renewAt = now.Add(l.cfg.RenewEvery - early)
}

// Claim attempts a create-only write. It returns nil when this worker now
// holds the lease, a *HeldError when another entry is there, and any other
// store error as is.
func (l *Lease) Claim(ctx context.Context, now time.Time) error {
	e, err := l.put(ctx, statestore.CreateOnly)
	if err != nil {
		var se *statestore.Error
		if errors.As(err, &se) && se.Code == statestore.Conflict {
			l.held, l.rev = false, 0
			return &HeldError{Key: l.cfg.Key, Revision: se.CurrentRevision, Err: err}
		}
		return err
	}
	l.held, l.rev = true, e.Revision
	l.schedule(now)
	return nil
}

// Renew rewrites the lease with compare-and-set on this worker's own
// revision, extending its TTL. A *LostError means it is no longer ours:
// stop acting on what it guarded.
func (l *Lease) Renew(ctx context.Context, now time.Time) error {
	if !l.held {
		return ErrNotHeld
	}
	e, err := l.put(ctx, statestore.IfRevision(l.rev))
	if err != nil {
		return l.lostOn(err)
	}
	l.rev = e.Revision
	l.schedule(now)
	return nil
}

// Release deletes the lease with compare-and-set on this worker's revision,
// so a standby can claim it at once instead of waiting for the TTL.
func (l *Lease) Release(ctx context.Context) error {
	if !l.held {
		return ErrNotHeld
	}
	_, err := l.c.Delete(ctx, statestore.DeleteRequest{Namespace: l.cfg.Namespace, Key: l.cfg.Key, Expect: statestore.IfRevision(l.rev)})
	if err != nil {
		return l.lostOn(err)
	}
	l.held, l.rev, l.renewAt = false, 0, time.Time{}
	return nil
}

// lostOn turns a CONFLICT or NOT_FOUND on our own revision into a
// LostError and forgets the lease; other errors (storage, disconnect) keep
// it, since the entry may still be ours until its TTL runs out.
func (l *Lease) lostOn(err error) error {
	var se *statestore.Error
	if !errors.As(err, &se) || (se.Code != statestore.Conflict && se.Code != statestore.NotFound) {
		return err
	}
	lost := &LostError{Key: l.cfg.Key, Revision: l.rev, Current: se.CurrentRevision, Err: err}
	l.held, l.rev, l.renewAt = false, 0, time.Time{}
	return lost
}

// Observe updates the lease from what a watch of its key shows: e, or nil
// when the key is absent, as of namespace revision seen. It reports whether
// a standby should attempt a Claim now (the key is absent and this worker
// does not hold it). When this worker held the lease and the watch, having
// caught up with our last write, shows another revision or no entry, the
// lease is lost and Observe returns a *LostError alongside. A view older
// than our last write says nothing about it.
func (l *Lease) Observe(e *statestore.Entry, seen uint64) (claim bool, lost error) {
	if l.held && seen >= l.rev && (e == nil || e.Revision != l.rev) {
		var cur uint64
		if e != nil {
			cur = e.Revision
		}
		lost = &LostError{Key: l.cfg.Key, Revision: l.rev, Current: cur}
		l.held, l.rev, l.renewAt = false, 0, time.Time{}
	}
	return e == nil && !l.held, lost
}
