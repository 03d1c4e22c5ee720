package consensus

import (
	"context"
	"errors"
	"fmt"
)

// Handler answers one request from a peer.
type Handler func(ctx context.Context, req []byte) ([]byte, error)

// Caller sends a request to the peer at addr and returns its answer. A
// failure before anything was sent is a *NotSentError or ErrNoPeer; any
// other leaves the call's outcome unknown.
type Caller interface {
	Call(ctx context.Context, addr string, req []byte) ([]byte, error)
}

// ErrNoPeer is a Call to an address nobody serves (an in-process caller
// with no handler registered there).
var ErrNoPeer = errors.New("replica: no peer at that address")

// NotSentError is a call that failed before any of it was sent (the
// dial): it may be retried.
type NotSentError struct {
	Addr string
	Err  error
}

// Error names the address and the cause.
func (e *NotSentError) Error() string { return fmt.Sprintf("replica rpc dial %s: %v", e.Addr, e.Err) }

// Unwrap returns the cause.
func (e *NotSentError) Unwrap() error { return e.Err }
