package mediasim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keeppeek/statestore/worker/reconcile"
)

// PrincipalHeader names the principal a command is sent as. The simulator
// believes it: the HTTP API authenticates nobody, so serve it on loopback,
// to test processes only.
const PrincipalHeader = "X-Mediasim-Principal"

// MaxPollWait bounds how long GET /v1/changed holds a request that has
// nothing new to report. It stays under common client and proxy idle
// timeouts, and a client re-polls after it.
const MaxPollWait = 25 * time.Second

// Body bounds: a request is one command (a few identifiers), an answer at
// most one source's advertisement.
const (
	maxRequestBytes = 64 << 10
	maxAnswerBytes  = 4 << 20
)

// The answer envelope, the same for every endpoint: 200 with result, 422
// with a refusal the simulator made, any other status with error.
type envelope struct {
	Result  json.RawMessage `json:"result,omitempty"`
	Refusal *refusal        `json:"refusal,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// refusal carries the simulator's typed errors across, field by field, so
// the Remote rebuilds an error equal to the one returned in process.
type refusal struct {
	Kind string `json:"kind"` // refusalCommand or refusalJoin
	// A *reconcile.CommandError:
	Command string              `json:"command,omitempty"`
	Code    reconcile.ErrorCode `json:"code,omitempty"`
	Message string              `json:"message,omitempty"`
	// A *JoinRefusedError:
	Group     string `json:"group,omitempty"`
	Principal string `json:"principal,omitempty"`
}

const (
	refusalCommand = "command"
	refusalJoin    = "join"
)

// sourceAnswer is GET /v1/source's result. A source without a session is
// ok false in a 200 answer, never a 404, so a wrong URL cannot pass for a
// disconnected source.
type sourceAnswer struct {
	OK     bool             `json:"ok"`
	Source reconcile.Source `json:"source"`
}

// changesAnswer is GET /v1/changed's result: the server's change counter
// and the epoch it counts in (a new Server starts a new epoch at 0).
type changesAnswer struct {
	Epoch   string `json:"epoch"`
	Counter uint64 `json:"counter"`
}

// idRequest names the binding to end (Unsubscribe, StopPublication).
type idRequest struct {
	ID string `json:"id"`
}

// joinRequest names the group to join.
type joinRequest struct {
	Group string `json:"group"`
}

// Handler serves the simulator's worker-facing operations as JSON over
// HTTP, for worker processes that cannot share this Server:
//
//	GET  /v1/source?id=ID                        Source: {"ok", "source"}
//	GET  /v1/changed[?epoch=E&after=N&wait=MS]   the change counter: {"epoch", "counter"}
//	POST /v1/subscribe          reconcile.SubscribeRequest    -> reconcile.Binding
//	POST /v1/unsubscribe        {"id"}                        -> {}
//	POST /v1/publication/start  reconcile.PublicationRequest  -> reconcile.Binding
//	POST /v1/publication/stop   {"id"}                        -> {}
//	POST /v1/join               {"group"}                     -> {}
//
// The reconcile types travel as encoding/json writes them (Go field
// names), so every field crosses. Every answer is an envelope: 200
// {"result": ...}; 422 {"refusal": ...} for a command the simulator
// refused (a reconcile.CommandError or a JoinRefusedError, field by field);
// 400 {"error": ...} for a request that names no principal, a malformed
// body or a bad parameter, which changes nothing. POST endpoints act as
// the principal in PrincipalHeader, unchecked: serve this on loopback only.
//
// GET /v1/changed is a long poll: with the epoch and counter of the
// client's last answer, it returns as soon as the counter moves past
// after, or after wait milliseconds (at most MaxPollWait) with the same
// counter; an epoch other than this Server's answers at once. Without
// after it answers at once.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/source", s.serveSource)
	mux.HandleFunc("GET /v1/changed", s.serveChanged)
	mux.HandleFunc("POST /v1/subscribe", command(s, func(r *http.Request, c *Client, req reconcile.SubscribeRequest) (any, error) {
		return c.Subscribe(r.Context(), req)
	}))
	mux.HandleFunc("POST /v1/unsubscribe", command(s, func(r *http.Request, c *Client, req idRequest) (any, error) {
		return struct{}{}, c.Unsubscribe(r.Context(), req.ID)
	}))
	mux.HandleFunc("POST /v1/publication/start", command(s, func(r *http.Request, c *Client, req reconcile.PublicationRequest) (any, error) {
		return c.StartPublication(r.Context(), req)
	}))
	mux.HandleFunc("POST /v1/publication/stop", command(s, func(r *http.Request, c *Client, req idRequest) (any, error) {
		return struct{}{}, c.StopPublication(r.Context(), req.ID)
	}))
	mux.HandleFunc("POST /v1/join", command(s, func(_ *http.Request, c *Client, req joinRequest) (any, error) {
		return struct{}{}, s.Join(c.principal, req.Group)
	}))
	return mux
}

func (s *Server) serveSource(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		writeError(w, http.StatusBadRequest, "query parameter id: required")
		return
	}
	src, ok := s.Source(id)
	writeResult(w, sourceAnswer{OK: ok, Source: src})
}

// changeState returns the counter, its epoch and the channel closed at the
// next change, read together so a change cannot fall between them.
func (s *Server) changeState() (changesAnswer, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return changesAnswer{Epoch: s.epoch, Counter: s.changes}, s.changed
}

func (s *Server) serveChanged(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cur, changed := s.changeState()
	if !q.Has("after") {
		writeResult(w, cur)
		return
	}
	after, err := strconv.ParseUint(q.Get("after"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter after: %q is not a counter", q.Get("after")))
		return
	}
	var wait time.Duration
	if q.Has("wait") {
		ms, err := strconv.ParseUint(q.Get("wait"), 10, 32)
		if err != nil || time.Duration(ms)*time.Millisecond > MaxPollWait {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter wait: %q is not a number of milliseconds up to %d", q.Get("wait"), MaxPollWait.Milliseconds()))
			return
		}
		wait = time.Duration(ms) * time.Millisecond
	}
	epoch := q.Get("epoch")
	if epoch == "" {
		writeError(w, http.StatusBadRequest, "query parameter epoch: required with after")
		return
	}
	if epoch != cur.Epoch || cur.Counter != after || wait == 0 {
		if epoch == cur.Epoch && after > cur.Counter {
			// Nobody was told this counter: a client's bug, not a wait.
			writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter after: %d is ahead of the counter %d", after, cur.Counter))
			return
		}
		writeResult(w, cur)
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	case <-r.Context().Done():
		return // the client went away; nobody reads an answer
	}
	cur, _ = s.changeState()
	writeResult(w, cur)
}

// command adapts one principal's command to a handler: the principal from
// PrincipalHeader, the request decoded strictly from a bounded body, the
// simulator's refusals as 422.
func command[Req any](s *Server, do func(*http.Request, *Client, Req) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		principal := r.Header.Get(PrincipalHeader)
		if principal == "" {
			writeError(w, http.StatusBadRequest, "header "+PrincipalHeader+": required")
			return
		}
		var req Req
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "body: "+err.Error())
			return
		}
		if dec.More() {
			writeError(w, http.StatusBadRequest, "body: more than one JSON value")
			return
		}
		out, err := do(r, s.Client(principal), req)
		if err == nil {
			writeResult(w, out)
			return
		}
		if ref, ok := refusalOf(err); ok {
			writeJSON(w, http.StatusUnprocessableEntity, envelope{Refusal: ref})
			return
		}
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// refusalOf encodes the simulator's typed errors.
func refusalOf(err error) (*refusal, bool) {
	var ce *reconcile.CommandError
	if errors.As(err, &ce) {
		return &refusal{Kind: refusalCommand, Command: ce.Command, Code: ce.Code, Message: ce.Message}, true
	}
	var je *JoinRefusedError
	if errors.As(err, &je) {
		return &refusal{Kind: refusalJoin, Group: je.Group, Principal: je.Principal}, true
	}
	return nil, false
}

// err rebuilds the error refusalOf encoded; nil for a kind this version
// does not know.
func (r *refusal) err() error {
	switch r.Kind {
	case refusalCommand:
		return &reconcile.CommandError{Command: r.Command, Code: r.Code, Message: r.Message}
	case refusalJoin:
		return &JoinRefusedError{Group: r.Group, Principal: r.Principal}
	}
	return nil
}

func writeResult(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the answer: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, envelope{Result: b})
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, envelope{Error: strings.TrimSpace(msg)})
}

func writeJSON(w http.ResponseWriter, status int, env envelope) {
	b, err := json.Marshal(env)
	if err != nil { // only a Result that is not JSON fails, and writeResult's is
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n')) // a write error means the client went away
}
