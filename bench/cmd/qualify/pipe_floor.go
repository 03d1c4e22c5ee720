package main

import (
	"errors"
	"io"
	"net"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
)

// Names of the transport floors: the store's CAS answered over a
// connection with no protocol at all.
const (
	// namePipeCASFloor is the floor under wire_cas (net.Pipe), a side of
	// targets_serial.
	namePipeCASFloor = "pipe_cas_floor"
	// nameTCPCASFloor is the floor under ws_cas (a loopback TCP socket).
	nameTCPCASFloor = "tcp_cas_floor"
)

// floorCAS is the floor under a wire transport: the same compare-and-sets,
// each done by a goroutine on the far side of a connection that a
// fixed-size request wakes and a fixed-size answer comes back on, with no
// protocol, framing or dispatcher at all. What it adds to the direct call
// is what any request/answer over that connection costs on this machine
// (the hand-offs between goroutines while the server sleeps in
// fdatasync, and over TCP the kernel's loopback path and the netpoller);
// a protocol over the same connection can only add more.
type floorCAS struct {
	conns  []net.Conn
	done   chan error
	buf    []byte
	owners []*casOwner
	// release frees what made the connections (a listener), after they
	// are closed.
	release func() error
}

// floorFrame is about a PutState of the 2,193-byte document.
const floorFrame = harness.DocBytes + 100

// connPair makes one connection and returns its server and client ends.
type connPair func() (srv, cli net.Conn, err error)

// newFloorCAS connects one client per owner through pair, each served by a
// goroutine that compare-and-sets the owner's document on s per request.
func newFloorCAS(s *statestore.Store, owners []*casOwner, pair connPair) (*floorCAS, error) {
	c := &floorCAS{done: make(chan error, len(owners)), buf: make([]byte, floorFrame), release: func() error { return nil }}
	for _, o := range owners {
		srv, cli, err := pair()
		if err != nil {
			return nil, errors.Join(err, c.close())
		}
		c.conns = append(c.conns, cli)
		c.owners = append(c.owners, o)
		go func() {
			buf := make([]byte, floorFrame)
			defer srv.Close()
			for {
				if _, err := io.ReadFull(srv, buf); err != nil {
					c.done <- nil // the client closed its end
					return
				}
				if err := o.CAS(s); err != nil {
					c.done <- err
					return
				}
				if _, err := srv.Write(buf); err != nil {
					c.done <- err
					return
				}
			}
		}()
	}
	return c, nil
}

// newPipeCAS is the floor over net.Pipe: pipe_cas_floor.
func newPipeCAS(s *statestore.Store, owners []*casOwner) (*floorCAS, error) {
	return newFloorCAS(s, owners, func() (net.Conn, net.Conn, error) {
		srv, cli := net.Pipe()
		return srv, cli, nil
	})
}

func (c *floorCAS) op(i int) error {
	conn := c.conns[i%len(c.conns)]
	if _, err := conn.Write(c.buf); err != nil {
		return err
	}
	_, err := io.ReadFull(conn, c.buf)
	return err
}

// close closes every client end, waits for every server goroutine, and
// returns the first failure.
func (c *floorCAS) close() error {
	var first error
	for _, conn := range c.conns {
		conn.Close()
		if err := <-c.done; first == nil {
			first = err
		}
	}
	c.conns = nil
	if err := c.release(); first == nil {
		first = err
	}
	return first
}
