package workerproc

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// Line is one line of a worker's standard output: one event, as a JSON
// object. Kind is a reconcile.EventKind for what the reconciler did (and
// for the group client's equivalents: EventResynced, EventCommandError,
// EventStoreError), or one of the Kind constants for the process's own
// events.
type Line struct {
	Time   time.Time `json:"time"`
	Role   string    `json:"role"`
	Holder string    `json:"holder"`
	Kind   string    `json:"kind"`
	Intent string    `json:"intent,omitempty"`
	Detail string    `json:"detail,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// The process's own event kinds.
const (
	// KindStarted: connected to the store and the media server; the
	// detail names the principal and the endpoint.
	KindStarted = "started"
	// KindDisconnected: the connection to the store was lost; the worker
	// acts on nothing until it has re-snapshotted.
	KindDisconnected = "disconnected"
	// KindReconnected: a new connection is up; a fresh snapshot follows.
	KindReconnected = "reconnected"
	// KindStopping: a signal arrived; the worker ends what it holds.
	KindStopping = "stopping"
	// KindStopped: bindings stopped, leases released, connections closed:
	// the last line before exit 0.
	KindStopped = "stopped"
	// KindPreference: the group client's stored preference changed; the
	// detail names the preferred group ("none" when there is none).
	KindPreference = "preference"
	// KindJoined: the media server admitted the group client to the group
	// in the detail.
	KindJoined = "joined"
	// KindJoinRefused: the group does not admit the principal; it is not
	// asked again until the preference changes.
	KindJoinRefused = "join-refused"
)

// emitter writes Lines, one whole line per event under its lock: the
// reconciler's goroutine, the client's link and the group client write to
// it concurrently.
type emitter struct {
	mu     sync.Mutex
	enc    *json.Encoder
	role   string
	holder string
	failed bool // stdout refused a line: nobody is reading any more
}

func newEmitter(w io.Writer, role string) *emitter {
	return &emitter{enc: json.NewEncoder(w), role: role}
}

func (e *emitter) setHolder(h string) {
	e.mu.Lock()
	e.holder = h
	e.mu.Unlock()
}

// emit writes one line. A write error is dropped: the worker goes on
// working for the store and the media server whether or not anyone reads
// its events.
func (e *emitter) emit(l Line) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed {
		return
	}
	l.Time, l.Role, l.Holder = time.Now().UTC(), e.role, e.holder
	if err := e.enc.Encode(l); err != nil {
		e.failed = true
	}
}

// event writes what a reconciler (or the group client) did.
func (e *emitter) event(ev reconcile.Event) {
	l := Line{Kind: string(ev.Kind), Intent: ev.Intent, Detail: ev.Detail}
	if ev.Err != nil {
		l.Error = ev.Err.Error()
	}
	e.emit(l)
}

// reportingLink is a reconciler's Link that also reports the connection's
// loss and return: the reconciler itself says nothing until it has
// re-snapshotted.
type reportingLink struct {
	*reconcile.Reconciler
	c   *client.Client
	out *emitter
}

// Disconnected tells the reconciler, then reports it.
func (l reportingLink) Disconnected() {
	l.Reconciler.Disconnected()
	l.out.emit(Line{Kind: KindDisconnected, Detail: "lost " + l.c.Endpoint()})
}

// Reconnected reports it, then tells the reconciler, whose fresh snapshot
// comes after.
func (l reportingLink) Reconnected() {
	l.out.emit(Line{Kind: KindReconnected, Detail: "connected to " + l.c.Endpoint()})
	l.Reconciler.Reconnected()
}
