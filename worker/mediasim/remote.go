package mediasim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keeppeek/statestore/worker/reconcile"
)

// Defaults of RemoteOptions.
const (
	DefaultRequestTimeout = 10 * time.Second
	DefaultRetryMin       = 100 * time.Millisecond
	DefaultRetryMax       = 5 * time.Second
)

// RemoteOptions configures Dial. The zero value is ready to use.
type RemoteOptions struct {
	// HTTPClient sends the requests. Nil: a client of the Remote's own,
	// whose idle connections Close releases. Its Timeout, when set, must
	// exceed PollWait, or every long poll would end in an error.
	HTTPClient *http.Client
	// PollWait is how long the server may hold a long poll that has
	// nothing new: 0 means MaxPollWait; otherwise at least a millisecond
	// (the API's unit) and at most MaxPollWait.
	PollWait time.Duration
	// RequestTimeout bounds every request beyond a long poll's wait: Source
	// has no context, and a hung server must not hold a worker's pass
	// forever. 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RetryMin and RetryMax bound the back-off between failed requests of
	// the poller, and between a failed command and the retry it wakes:
	// RetryMin doubles per consecutive failure up to RetryMax. 0 means
	// DefaultRetryMin and DefaultRetryMax.
	RetryMin, RetryMax time.Duration
	// OnRequestError, when set, receives every RequestError, including
	// those of Source and the poller, which return none (a worker process
	// logs them). It is called on the goroutine that made the request and
	// must not block.
	OnRequestError func(*RequestError)
}

// DialError is an argument of Dial that cannot make a Remote.
type DialError struct {
	Field  string // "base_url", "principal", "poll_wait", ...
	Reason string
}

// Error names the field.
func (e *DialError) Error() string { return "mediasim: dial: " + e.Field + ": " + e.Reason }

// RequestError is a request to the HTTP API that got neither a result nor
// one of the simulator's refusals: the server was unreachable or the
// request timed out (Status 0), or it answered another status (a bad
// request, a wrong path). It is never a *reconcile.CommandError, so
// reconcile reports it as a failed command (status Failed, not Invalid)
// and retries when Changed closes, which it does once the server answers
// again (see Remote).
type RequestError struct {
	Op     string // the operation: "Subscribe", "Source", "Changed", ...
	URL    string // the request's URL
	Status int    // the HTTP status; 0 when no answer came
	Err    error
}

// Error names the operation, the URL and the status.
func (e *RequestError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("mediasim: %s %s: HTTP %d: %v", e.Op, e.URL, e.Status, e.Err)
	}
	return fmt.Sprintf("mediasim: %s %s: %v", e.Op, e.URL, e.Err)
}

// Unwrap returns the cause.
func (e *RequestError) Unwrap() error { return e.Err }

// ErrClosed is the cause of a RequestError for a call after Remote.Close.
var ErrClosed = errors.New("mediasim: remote closed")

// Remote is one principal's view of a Server reached through its Handler:
// it implements reconcile.Capabilities and reconcile.Media, and Join, with
// the same results and errors as the Server and its Client in process.
// Its methods are safe for concurrent use.
//
// Changed follows the server's change counter with one background long
// poll, started by the first Changed and ended by Close. The rule that
// keeps it from missing a change: the poller always waits past the
// counter of its own last answer, never one read elsewhere, so a change
// made after a Changed call moves the server's counter past the value that
// channel waits on, whether the change landed before the poll reached the
// server, while it waited, or while its answer was on the way back. So a
// channel closes when an answer's counter or epoch differs from the
// previous answer's; a channel taken before the first answer closes at
// the first answer; and after any failed request (the poller's, a
// command's or Source's) the next answer closes it whatever its counter,
// since the Remote cannot know what it missed, and reconcile retries a
// failed command only when Changed closes. A failed command or Source call
// also ends the long poll in flight, so that answer comes after the
// back-off instead of at the end of PollWait. A channel may thus close for
// a change made just before its call, but never stays open once the
// server has counted a change made after it.
//
// While the server is unreachable, Source answers what it last answered
// for that source (false if it never saw it advertised): a failed request
// must not make a bound source look disconnected, which would make
// reconcile forget a binding the server still holds. It keeps one entry
// per source ID asked about whose latest answer was advertised.
type Remote struct {
	base      string
	principal string
	hc        *http.Client
	ownClient bool
	opts      RemoteOptions

	mu sync.Mutex
	ch chan struct{} // the channel Changed hands out
	// The last answer of the poller, and whether there was one.
	known bool
	last  changesAnswer
	// unsure: a request failed since the last answer, so the next answer
	// closes ch whatever its counter.
	unsure bool
	// kicks counts consecutive failed commands and Source calls, kicked
	// says the poller has to probe after backing off for them.
	kicks      int
	kicked     bool
	pollCancel context.CancelFunc // ends the poller's request in flight
	started    bool
	closed     bool
	stop       context.CancelFunc
	done       chan struct{}
	sources    map[string]reconcile.Source // Source's last advertised answers
}

// Dial returns principal's Remote on the API Handler serves at baseURL
// (http://127.0.0.1:port, or with a path prefix). It sends nothing yet.
func Dial(baseURL, principal string, opts RemoteOptions) (*Remote, error) {
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		return nil, &DialError{"base_url", err.Error()}
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, &DialError{"base_url", fmt.Sprintf("%q: scheme must be http or https", baseURL)}
	case u.Host == "":
		return nil, &DialError{"base_url", fmt.Sprintf("%q: no host", baseURL)}
	case u.RawQuery != "" || u.Fragment != "":
		return nil, &DialError{"base_url", fmt.Sprintf("%q: a base URL has no query or fragment", baseURL)}
	case principal == "":
		return nil, &DialError{"principal", "required"}
	case strings.ContainsFunc(principal, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }):
		return nil, &DialError{"principal", fmt.Sprintf("%q: control characters cannot travel in %s", principal, PrincipalHeader)}
	case opts.PollWait < 0 || opts.PollWait > MaxPollWait || (opts.PollWait > 0 && opts.PollWait < time.Millisecond):
		return nil, &DialError{"poll_wait", fmt.Sprintf("%v: want 0 (%v) or 1ms to %v", opts.PollWait, MaxPollWait, MaxPollWait)}
	case opts.RequestTimeout < 0:
		return nil, &DialError{"request_timeout", fmt.Sprintf("%v is negative", opts.RequestTimeout)}
	case opts.RetryMin < 0 || opts.RetryMax < 0:
		return nil, &DialError{"retry", fmt.Sprintf("min %v, max %v: negative", opts.RetryMin, opts.RetryMax)}
	}
	if opts.PollWait == 0 {
		opts.PollWait = MaxPollWait
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.RetryMin == 0 {
		opts.RetryMin = DefaultRetryMin
	}
	if opts.RetryMax == 0 {
		opts.RetryMax = max(DefaultRetryMax, opts.RetryMin)
	}
	if opts.RetryMin > opts.RetryMax {
		return nil, &DialError{"retry", fmt.Sprintf("min %v exceeds max %v", opts.RetryMin, opts.RetryMax)}
	}
	r := &Remote{base: strings.TrimSuffix(u.String(), "/"), principal: principal, hc: opts.HTTPClient, opts: opts,
		ch: make(chan struct{}), sources: map[string]reconcile.Source{}}
	if r.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		r.hc, r.ownClient = &http.Client{Transport: tr}, true
	}
	if t := r.hc.Timeout; t != 0 && t <= opts.PollWait {
		return nil, &DialError{"http_client", fmt.Sprintf("Timeout %v does not exceed poll_wait %v: every long poll would fail", t, opts.PollWait)}
	}
	return r, nil
}

// Principal returns the principal the Remote's commands are sent as.
func (r *Remote) Principal() string { return r.principal }

// Changed implements reconcile.Capabilities (see Remote for its rule).
// After Close it returns a channel that never closes.
func (r *Remote) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started && !r.closed {
		r.started = true
		ctx, cancel := context.WithCancel(context.Background())
		r.stop, r.done = cancel, make(chan struct{})
		go r.poll(ctx)
	}
	return r.ch
}

// Close stops the poller, waiting for it, and releases the idle
// connections of a client the Remote made. Later calls fail with ErrClosed.
func (r *Remote) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	stop, done := r.stop, r.done
	r.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	if r.ownClient {
		r.hc.CloseIdleConnections()
	}
	return nil
}

// Source implements reconcile.Capabilities with GET /v1/source; while the
// server is unreachable it answers what it last answered (see Remote).
func (r *Remote) Source(id string) (reconcile.Source, bool) {
	if id == "" {
		return reconcile.Source{}, false // what the Server answers; the API refuses an empty id
	}
	var ans sourceAnswer
	err := r.call(context.Background(), "Source", http.MethodGet, "/v1/source", url.Values{"id": {id}}, nil, &ans)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		src, ok := r.sources[id]
		return cloneSource(src), ok
	}
	if ans.OK {
		r.sources[id] = cloneSource(ans.Source)
	} else {
		delete(r.sources, id)
	}
	return ans.Source, ans.OK
}

func cloneSource(s reconcile.Source) reconcile.Source {
	s.Streams, s.Profiles, s.Variants = slices.Clone(s.Streams), slices.Clone(s.Profiles), slices.Clone(s.Variants)
	return s
}

// Subscribe implements reconcile.Media.
func (r *Remote) Subscribe(ctx context.Context, req reconcile.SubscribeRequest) (reconcile.Binding, error) {
	var b reconcile.Binding
	if err := r.call(ctx, "Subscribe", http.MethodPost, "/v1/subscribe", nil, req, &b); err != nil {
		return reconcile.Binding{}, err
	}
	return b, nil
}

// Unsubscribe implements reconcile.Media.
func (r *Remote) Unsubscribe(ctx context.Context, subscriptionID string) error {
	return r.call(ctx, "Unsubscribe", http.MethodPost, "/v1/unsubscribe", nil, idRequest{ID: subscriptionID}, &struct{}{})
}

// StartPublication implements reconcile.Media.
func (r *Remote) StartPublication(ctx context.Context, req reconcile.PublicationRequest) (reconcile.Binding, error) {
	var b reconcile.Binding
	if err := r.call(ctx, "StartPublication", http.MethodPost, "/v1/publication/start", nil, req, &b); err != nil {
		return reconcile.Binding{}, err
	}
	return b, nil
}

// StopPublication implements reconcile.Media.
func (r *Remote) StopPublication(ctx context.Context, publicationID string) error {
	return r.call(ctx, "StopPublication", http.MethodPost, "/v1/publication/stop", nil, idRequest{ID: publicationID}, &struct{}{})
}

// Join is Server.Join as the Remote's principal: a refusal is a
// *JoinRefusedError.
func (r *Remote) Join(ctx context.Context, groupID string) error {
	return r.call(ctx, "Join", http.MethodPost, "/v1/join", nil, joinRequest{Group: groupID}, &struct{}{})
}

// call makes one request on behalf of a caller, bounded by
// RequestTimeout. A RequestError makes the Remote unsure (the next answer
// closes Changed's channel) and kicks the poller to probe, after a
// back-off that grows with consecutive failures; any answer resets it.
func (r *Remote) call(ctx context.Context, op, method, path string, q url.Values, body, out any) error {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return r.report(&RequestError{Op: op, URL: r.url(path, q), Err: ErrClosed})
	}
	reqCtx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	err := r.do(reqCtx, op, method, path, q, body, out)
	var re *RequestError
	if !errors.As(err, &re) {
		r.mu.Lock()
		r.kicks = 0
		r.mu.Unlock()
		return err
	}
	r.mu.Lock()
	if ctx.Err() == nil { // not the caller giving up
		r.unsure, r.kicked = true, true
		r.kicks++
		if r.pollCancel != nil {
			r.pollCancel()
		}
	}
	r.mu.Unlock()
	return r.report(re)
}

func (r *Remote) url(path string, q url.Values) string {
	if len(q) == 0 {
		return r.base + path
	}
	return r.base + path + "?" + q.Encode()
}

// report hands e to OnRequestError.
func (r *Remote) report(e *RequestError) error {
	if r.opts.OnRequestError != nil {
		r.opts.OnRequestError(e)
	}
	return e
}

// do sends one request and decodes its envelope: the result into out, a
// refusal into the simulator's own error type, anything else into a
// *RequestError, which the caller reports.
func (r *Remote) do(ctx context.Context, op, method, path string, q url.Values, body, out any) error {
	u := r.url(path, q)
	fail := func(status int, err error) error { return &RequestError{Op: op, URL: u, Status: status, Err: err} }
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fail(0, fmt.Errorf("encoding the request: %w", err))
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fail(0, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(PrincipalHeader, r.principal)
	resp, err := r.hc.Do(req)
	if err != nil {
		return fail(0, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	switch {
	case err != nil:
		return fail(resp.StatusCode, fmt.Errorf("reading the answer: %w", err))
	case len(raw) > maxAnswerBytes:
		return fail(resp.StatusCode, fmt.Errorf("answer over %d bytes", maxAnswerBytes))
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return fail(resp.StatusCode, fmt.Errorf("not the API's answer (%w): %q", err, snippet(raw)))
	}
	switch {
	case resp.StatusCode == http.StatusOK && env.Result != nil:
		if err := json.Unmarshal(env.Result, out); err != nil {
			return fail(resp.StatusCode, fmt.Errorf("decoding the result: %w", err))
		}
		return nil
	case resp.StatusCode == http.StatusUnprocessableEntity && env.Refusal != nil:
		if err := env.Refusal.err(); err != nil {
			return err
		}
		return fail(resp.StatusCode, fmt.Errorf("a refusal of unknown kind %q", env.Refusal.Kind))
	case env.Error != "":
		return fail(resp.StatusCode, errors.New(env.Error))
	}
	return fail(resp.StatusCode, fmt.Errorf("unexpected answer %q", snippet(raw)))
}

// snippet is the start of an answer, for an error message.
func snippet(b []byte) string {
	const n = 100
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// backoff is RetryMin doubled per failure after the first, up to RetryMax.
func (r *Remote) backoff(failures int) time.Duration {
	d := r.opts.RetryMin
	for i := 1; i < failures && d < r.opts.RetryMax; i++ {
		d *= 2
	}
	return min(d, r.opts.RetryMax)
}

// poll is the Remote's one background goroutine: it long-polls the
// server's change counter from its last answer and closes the Changed
// channel as the type's comment says.
func (r *Remote) poll(ctx context.Context) {
	defer close(r.done)
	failures := 0 // consecutive failed polls
	for {
		r.mu.Lock()
		var delay time.Duration
		if failures > 0 {
			delay = r.backoff(failures)
		}
		if r.kicked {
			r.kicked = false
			delay = max(delay, r.backoff(r.kicks))
		}
		r.mu.Unlock()
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}

		r.mu.Lock()
		q := url.Values{}
		if r.known && !r.unsure {
			q.Set("epoch", r.last.Epoch)
			q.Set("after", strconv.FormatUint(r.last.Counter, 10))
			q.Set("wait", strconv.FormatInt(r.opts.PollWait.Milliseconds(), 10))
		}
		reqCtx, cancel := context.WithTimeout(ctx, r.opts.PollWait+r.opts.RequestTimeout)
		r.pollCancel = cancel
		r.mu.Unlock()

		var ans changesAnswer
		err := r.do(reqCtx, "Changed", http.MethodGet, "/v1/changed", q, nil, &ans)
		cancel()

		var failed *RequestError // reported after the unlock
		r.mu.Lock()
		r.pollCancel = nil
		switch {
		case ctx.Err() != nil:
			r.mu.Unlock()
			return
		case err != nil: // a *RequestError: the endpoint makes no refusals
			r.unsure = true
			if !r.kicked { // a kick's cancellation is no failure of the server
				failures++
				errors.As(err, &failed)
			}
		default:
			failures = 0
			if !r.known || r.unsure || ans != r.last {
				close(r.ch)
				r.ch = make(chan struct{})
			}
			r.known, r.last, r.unsure = true, ans, false
		}
		r.mu.Unlock()
		if failed != nil {
			r.report(failed)
		}
	}
}
