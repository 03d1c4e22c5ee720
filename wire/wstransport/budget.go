package wstransport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ConnBudget caps the connections a server holds at once, over every
// listener it wraps: an accepted connection counts until it is closed,
// whether it stays plain HTTP or is upgraded to a WebSocket. A connection
// accepted over the cap is refused at once, so a flood never reaches the
// HTTP server and never holds a descriptor for longer than its refusal:
// on a plain-HTTP listener it is answered 503 naming the bound, on a TLS
// one (where an answer would cost a handshake) it is closed.
//
// It is safe for concurrent use.
type ConnBudget struct {
	max  int
	name string // the bound as the operator configures it

	active   atomic.Int64
	refused  atomic.Uint64
	refusing atomic.Int64 // refusals still writing their 503
}

// MaxRefusing bounds the refusals being answered at once: each holds its
// descriptor for at most refuseTimeout, and a refusal beyond these is
// closed without an answer. A descriptor budget counts them (see
// ConnectionsForDescriptors).
const MaxRefusing = 16

// refuseTimeout bounds the writing of a 503 and the reading of what the
// peer sent before it (so the close does not reset the connection under
// the answer).
const refuseTimeout = time.Second

// NewConnBudget returns a budget of max connections; name is the bound
// as its refusals name it ("server.max_connections", "--max-connections").
func NewConnBudget(max int, name string) (*ConnBudget, error) {
	if max <= 0 {
		return nil, &OptionError{Field: "MaxConnections", Message: fmt.Sprintf("%d: want at least 1 (%s)", max, name)}
	}
	return &ConnBudget{max: max, name: name}, nil
}

// Max returns the cap.
func (b *ConnBudget) Max() int { return b.max }

// Active returns the connections held now.
func (b *ConnBudget) Active() int { return int(b.active.Load()) }

// Refused returns how many connections were refused over the cap.
func (b *ConnBudget) Refused() uint64 { return b.refused.Load() }

// Listen wraps ln, whose connections then count against the budget.
// plainHTTP says ln carries HTTP without TLS (wrap below tls.NewListener,
// never above it: the HTTP server must see the *tls.Conn), so a refusal
// can be answered 503.
func (b *ConnBudget) Listen(ln net.Listener, plainHTTP bool) net.Listener {
	return &budgetListener{Listener: ln, b: b, plain: plainHTTP}
}

type budgetListener struct {
	net.Listener
	b     *ConnBudget
	plain bool
}

// Accept returns the next connection under the cap, refusing the ones
// over it on the way.
func (l *budgetListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.b.active.Add(1); n <= int64(l.b.max) {
			return &budgetConn{Conn: c, b: l.b}, nil
		}
		l.b.active.Add(-1)
		l.b.refused.Add(1)
		l.refuse(c)
	}
}

// refuse answers c 503 on a plain listener, while fewer than MaxRefusing
// refusals are in progress, and closes it otherwise.
func (l *budgetListener) refuse(c net.Conn) {
	if !l.plain || l.b.refusing.Add(1) > MaxRefusing {
		if l.plain {
			l.b.refusing.Add(-1)
		}
		c.Close()
		return
	}
	go func() {
		defer l.b.refusing.Add(-1)
		defer c.Close()
		body := (&ConnLimitError{Bound: l.b.name, Limit: l.b.max}).Error() + "\n"
		c.SetDeadline(time.Now().Add(refuseTimeout))
		if _, err := fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"+
			"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return
		}
		// Half-close and read what the peer sent: closing with unread
		// input would reset the connection and could discard the answer.
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// budgetConn gives its slot back once, at the first Close.
type budgetConn struct {
	net.Conn
	b    *ConnBudget
	once sync.Once
}

func (c *budgetConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.b.active.Add(-1) })
	return err
}

// CloseWrite half-closes a TCP connection; the HTTP server uses it to
// end a response cleanly.
func (c *budgetConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// ConnLimitError is a connection or session refused over a bound: the
// body of a 503 (connections) or a 429 (sessions per principal).
type ConnLimitError struct {
	Bound     string // the bound as configured
	Limit     int
	Principal string // for the sessions-per-principal bound
}

// Error names the bound and its value.
func (e *ConnLimitError) Error() string {
	if e.Principal != "" {
		return fmt.Sprintf("wstransport: principal %q already has %d sessions, the %s limit", e.Principal, e.Limit, e.Bound)
	}
	return fmt.Sprintf("wstransport: %d connections are open, the %s limit; retry later", e.Limit, e.Bound)
}

// DescriptorBudget is how a process's descriptors divide between its
// connections and everything else (ConnectionsForDescriptors).
type DescriptorBudget struct {
	Limit       int // RLIMIT_NOFILE's soft limit
	Open        int // descriptors open when it was measured
	Reserve     int // kept for the store's files and the process
	Connections int // what is left for connections: the cap to use
}

// ConnectionsForDescriptors measures the process's descriptors (its
// RLIMIT_NOFILE soft limit and those open now, from /proc/self/fd) and
// returns how many connections it may hold while reserve descriptors stay
// free for everything else: the store's journal segments, checkpoints,
// LOCK file and directory fsyncs, the listeners and what the runtime
// opens. Refusals in progress (MaxRefusing) and the one connection an
// Accept takes before it can refuse come out of the connections' share.
// Call it once the store is open, so its steady descriptors count as Open.
// An error when fewer than one connection remains.
func ConnectionsForDescriptors(reserve int) (DescriptorBudget, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return DescriptorBudget{}, fmt.Errorf("wstransport: RLIMIT_NOFILE: %w", err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return DescriptorBudget{}, fmt.Errorf("wstransport: counting open descriptors: %w", err)
	}
	d := DescriptorBudget{Limit: int(min(rl.Cur, 1<<30)), Open: len(ents), Reserve: reserve}
	d.Connections = d.Limit - d.Open - d.Reserve - MaxRefusing - 1
	if d.Connections < 1 {
		return d, fmt.Errorf("wstransport: RLIMIT_NOFILE %d leaves no descriptor for connections (%d open, %d reserved for the store, %d for refusals): raise the limit",
			d.Limit, d.Open, d.Reserve, MaxRefusing+1)
	}
	return d, nil
}
