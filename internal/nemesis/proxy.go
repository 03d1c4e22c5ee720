package nemesis

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Mode is what a Proxy does with the bytes it is given.
type Mode uint8

// The modes. Drop closes every connection and refuses (accepts and at
// once closes) new ones: the peer sees resets and fails fast. Blackhole
// keeps connections open and new ones accepted but delivers nothing: the
// peer sees silence and waits for its own timeouts, as behind a
// partitioned switch.
const (
	Pass Mode = iota
	Drop
	Blackhole
)

func (m Mode) String() string {
	switch m {
	case Drop:
		return "drop"
	case Blackhole:
		return "blackhole"
	}
	return "pass"
}

// Proxy forwards TCP connections from its own port on 127.0.0.1 to one
// target: the fault proxy in front of one direction of one pair of nodes
// (what node A dials to reach node B), so cutting it partitions exactly
// that direction and touches nothing beyond loopback.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	mode  Mode
	links map[*link]struct{}
	done  chan struct{} // closed once the accept loop returned
}

// link is one proxied connection, both of its sides. Its own lock orders
// attaching the target's side (serve, once dialed) against closing it
// (Set, from another goroutine).
type link struct {
	in net.Conn

	mu     sync.Mutex
	out    net.Conn
	closed bool
}

func (l *link) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	out := l.out
	l.mu.Unlock()
	l.in.Close()
	if out != nil {
		out.Close()
	}
}

// attach sets the target's side, and reports false when the link was
// closed first (the caller then closes out).
func (l *link) attach(out net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.out = out
	return true
}

// NewProxy listens on a fresh 127.0.0.1 port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("nemesis: proxy to %s: %w", target, err)
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}, done: make(chan struct{})}
	go p.accept()
	return p, nil
}

// Addr is the proxy's own address, the one to dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Mode is the proxy's current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Set changes the mode. Leaving Pass for Drop closes every connection at
// once; leaving Blackhole closes them too, since their streams lost bytes
// (a TCP connection through a healed partition would have been reset by
// its retransmission timeout).
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	old := p.mode
	p.mode = m
	var cut []*link
	if m == Drop || old == Blackhole && m != Blackhole {
		for l := range p.links {
			cut = append(cut, l)
			delete(p.links, l)
		}
	}
	p.mu.Unlock()
	for _, l := range cut {
		l.close()
	}
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	<-p.done
	p.Set(Drop)
	return err
}

func (p *Proxy) accept() {
	defer close(p.done)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

// serve carries one connection for as long as the mode lets it.
func (p *Proxy) serve(c net.Conn) {
	l := &link{in: c}
	p.mu.Lock()
	mode := p.mode
	if mode != Drop {
		p.links[l] = struct{}{}
	}
	p.mu.Unlock()
	switch mode {
	case Drop:
		c.Close()
		return
	case Blackhole:
		// Swallowed until the mode changes, which closes it.
		io.Copy(io.Discard, c)
		p.forget(l)
		return
	}
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		p.forget(l)
		return
	}
	p.mu.Lock()
	_, live := p.links[l]
	p.mu.Unlock()
	if !live || !l.attach(out) { // cut while dialing: close has run, without out
		out.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(out, c, l) }()
	go func() { defer wg.Done(); p.pipe(c, out, l) }()
	wg.Wait()
	p.forget(l)
}

// pipe copies src to dst while the mode is Pass, discards while it is
// Blackhole, and closes the link when either side ends.
func (p *Proxy) pipe(dst, src net.Conn, l *link) {
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.Mode() == Pass {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close()
}
