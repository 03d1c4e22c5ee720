package main

import (
	"io"
	"net"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
)

// namePipeCASFloor names the transport floor's side of targets_serial.
const namePipeCASFloor = "pipe_cas_floor"

// pipeCAS is the floor under wire_cas: the same compare-and-sets, each done
// by a goroutine on the far side of a net.Pipe that a fixed-size request
// wakes and a fixed-size answer comes back on, with no protocol, framing or
// dispatcher at all. What it adds to the direct call is what any
// request/answer transport over net.Pipe costs on this machine (the
// goroutine hand-offs while the server sleeps in fdatasync); wire_cas can
// only add more.
type pipeCAS struct {
	conns  []net.Conn
	done   chan error
	buf    []byte
	owners []*casOwner
}

// floorFrame is about a PutState of the 2,193-byte document.
const floorFrame = harness.DocBytes + 100

func newPipeCAS(s *statestore.Store, owners []*casOwner) *pipeCAS {
	c := &pipeCAS{done: make(chan error, len(owners)), buf: make([]byte, floorFrame), owners: owners}
	for _, o := range owners {
		srv, cli := net.Pipe()
		c.conns = append(c.conns, cli)
		go func() {
			buf := make([]byte, floorFrame)
			for {
				if _, err := io.ReadFull(srv, buf); err != nil {
					c.done <- nil // the client closed its end
					return
				}
				if err := o.cas(s); err != nil {
					srv.Close()
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
	return c
}

func (c *pipeCAS) op(i int) error {
	conn := c.conns[i%len(c.conns)]
	if _, err := conn.Write(c.buf); err != nil {
		return err
	}
	_, err := io.ReadFull(conn, c.buf)
	return err
}

func (c *pipeCAS) close() error {
	var first error
	for _, conn := range c.conns {
		conn.Close()
		if err := <-c.done; first == nil {
			first = err
		}
	}
	return first
}
