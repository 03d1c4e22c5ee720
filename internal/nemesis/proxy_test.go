package nemesis

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echo serves line echoes on a fresh 127.0.0.1 port until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through c and reads it back, waiting at most
// wait.
func roundTrip(c net.Conn, wait time.Duration) error {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	l, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && l != "ping\n" {
		return errors.New("echo garbled: " + l)
	}
	return err
}

// TestProxyModes: Pass carries both ways; Drop closes what is open and
// refuses what comes; Blackhole accepts and delivers nothing; back to
// Pass, new connections carry again (a blackholed one is closed, its
// stream having lost bytes).
func TestProxyModes(t *testing.T) {
	t.Parallel()
	p, err := NewProxy(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Generous for what must arrive; short for what must not: silence is
	// only ever shown by waiting.
	const arrive, silent = 10 * time.Second, 200 * time.Millisecond

	open := dial()
	if err := roundTrip(open, arrive); err != nil {
		t.Fatalf("pass: %v", err)
	}
	p.Set(Drop)
	if err := roundTrip(open, arrive); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an open connection after Drop: %v, want it closed", err)
	}
	if err := roundTrip(dial(), arrive); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a new connection under Drop: %v, want it closed", err)
	}
	p.Set(Pass)
	open = dial()
	if err := roundTrip(open, arrive); err != nil {
		t.Fatalf("pass again: %v", err)
	}
	p.Set(Blackhole)
	if err := roundTrip(open, silent); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an open connection under Blackhole: %v, want silence", err)
	}
	hole := dial()
	if err := roundTrip(hole, silent); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a new connection under Blackhole: %v, want silence", err)
	}
	p.Set(Pass)
	if err := roundTrip(hole, arrive); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a blackholed connection after the heal: %v, want it closed", err)
	}
	if err := roundTrip(dial(), arrive); err != nil {
		t.Fatalf("a new connection after the heal: %v", err)
	}
}
