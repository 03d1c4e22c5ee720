package main

import (
	"fmt"
	"io"
	"net"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/harness"
)

// Names of the transport-floor workload's rows.
const (
	nameDurableCASFloor = "durable_cas_floor"
	namePipeCASFloor    = "pipe_cas_floor"
)

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

// runPipeFloorPaired measures the transport floor under the wire target:
// durable_cas_floor (direct) and pipe_cas_floor (the same CAS answered
// over net.Pipe with no protocol) in alternating rounds, as
// wire_cas_paired does. The pipe row's note gives the floor's p50 ratio:
// when it alone exceeds the wire target's 1.1x, no dispatcher over
// net.Pipe can meet that target on this machine.
func runPipeFloorPaired(env *Env) ([]harness.Result, error) {
	direct, err := openScratch(env, nameDurableCASFloor, statestore.Options{})
	if err != nil {
		return nil, err
	}
	defer direct.Close()
	piped, err := openScratch(env, namePipeCASFloor, statestore.Options{})
	if err != nil {
		return nil, err
	}
	defer piped.Close()
	owners := newOwners(casKeys)
	c := newPipeCAS(piped, newOwners(casKeys))
	sides := [2]*pairedSide{
		{name: nameDurableCASFloor, op: func(i int) error { return owners[i%casKeys].cas(direct) }},
		{name: namePipeCASFloor, op: c.op},
	}
	err = alternateRounds(env.Ops, casKeys, sides)
	if cerr := c.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	d := sides[0].result(fmt.Sprintf("n=%d owners=%d doc=%dB, rounds alternating with %s", sides[0].ops, casKeys, harness.DocBytes, namePipeCASFloor))
	p := sides[1].result(fmt.Sprintf("n=%d the same CAS answered over net.Pipe, no protocol (%d-byte frames), rounds alternating with %s; p50 ratio %.3fx, %s",
		sides[1].ops, floorFrame, nameDurableCASFloor, sides[1].lat.Percentile(50).Seconds()/sides[0].lat.Percentile(50).Seconds(),
		spread(roundRatios(sides[1], sides[0]))))
	return []harness.Result{d, p}, nil
}
