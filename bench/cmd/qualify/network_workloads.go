package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/bench/etcdpeer"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/natspeer"
	"github.com/keeppeek/statestore/bench/report"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// The network path: the store as a remote user reaches it (the typed Go
// client over WebSocket on loopback TCP), the floor of any request/answer
// over that TCP, and the network peers a user would pick instead (etcd over
// gRPC, NATS JetStream KV over nats.go). network_serial and network_concurrent run them alternating with
// the in-process rows in one process, so their ratios are the workloads'
// own and not the disk's drift between rows.
const (
	nameWSCAS             = "ws_cas"
	nameWSCASConcurrent   = "ws_cas_concurrent"
	nameNetworkSerial     = "network_serial"
	nameNetworkConcurrent = "network_concurrent"
)

// wsServer serves a store's wire protocol as a server process would: an
// http.Server on 127.0.0.1:0 with a wstransport.Handler at
// client.WebSocketPath, each owner's bearer token mapped to its principal.
type wsServer struct {
	h      *wstransport.Handler
	srv    *http.Server
	served chan error
	url    string
}

// tokenTable authenticates a bearer token by looking it up: one token per
// principal, as a media server maps its sessions' credentials.
type tokenTable map[string]statestore.Principal

// Authenticate returns the principal of the request's bearer token.
func (t tokenTable) Authenticate(r *http.Request) (statestore.Principal, error) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return statestore.Principal{}, wstransport.ErrNoToken
	}
	p, ok := t[strings.TrimSpace(tok)]
	if !ok {
		return statestore.Principal{}, wstransport.ErrBadToken
	}
	return p, nil
}

// tokenOf is an owner's bearer token.
func tokenOf(o *casOwner) string { return "token-" + o.Principal.ID }

func serveWS(s *statestore.Store, owners []*casOwner) (*wsServer, error) {
	table := tokenTable{}
	for _, o := range owners {
		table[tokenOf(o)] = o.Principal
	}
	h, err := wstransport.NewHandler(dispatch.New(s, dispatch.Options{}), wstransport.Options{Authenticator: table})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("ws_cas: listen on 127.0.0.1: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(client.WebSocketPath, h)
	w := &wsServer{h: h, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, served: make(chan error, 1),
		url: "ws://" + ln.Addr().String()}
	go func() { w.served <- w.srv.Serve(ln) }()
	return w, nil
}

// close ends every session, then the server, and waits for Serve.
func (w *wsServer) close() error {
	err := w.h.Close()
	err = errors.Join(err, w.srv.Close())
	if serr := <-w.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// wsCAS is the client side of ws_cas: each of the 127 owners has its own
// client (its own WebSocket connection, session and token) and
// compare-and-sets its document through client.Client.Put.
type wsCAS struct {
	srv     *wsServer
	owners  []*casOwner
	clients []*client.Client
}

func newWSCAS(s *statestore.Store) (*wsCAS, error) {
	c := &wsCAS{owners: newOwners(casKeys)}
	srv, err := serveWS(s, c.owners)
	if err != nil {
		return nil, err
	}
	c.srv = srv
	for _, o := range c.owners {
		cl, err := client.Dial(context.Background(), client.Config{Endpoints: []string{srv.url}, Token: tokenOf(o)})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("ws_cas: dial %s as %s: %w", srv.url, o.Principal.ID, err), c.close())
		}
		c.clients = append(c.clients, cl)
	}
	return c, nil
}

// put is owner k's next compare-and-set, from the request's encoding to
// its answer's decode.
func (c *wsCAS) put(k int) error {
	o := c.owners[k]
	e, err := c.clients[k].Put(context.Background(), o.Request())
	if err != nil {
		return err
	}
	if e.Revision <= o.Rev {
		return fmt.Errorf("owner %s: revision %d answered after %d", o.Principal.ID, e.Revision, o.Rev)
	}
	o.Rev = e.Revision
	return nil
}

// op is the serial workload's i-th compare-and-set.
func (c *wsCAS) op(i int) error { return c.put(i % casKeys) }

// close closes every client and then the server.
func (c *wsCAS) close() error {
	var errs []error
	for _, cl := range c.clients {
		errs = append(errs, cl.Close())
	}
	c.clients = nil
	errs = append(errs, c.srv.close())
	return errors.Join(errs...)
}

const wsCASNote = "client/ over WebSocket on loopback TCP (http.Server, wstransport.Handler, dispatcher), one connection and bearer token per owner"

// runWSCAS is durable_cas through client/ over WebSocket, on its own:
// the absolute row; network_serial gives the ratios.
func runWSCAS(env *Env) ([]harness.Result, error) {
	s, err := openScratch(env, nameWSCAS, statestore.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	c, err := newWSCAS(s)
	if err != nil {
		return nil, err
	}
	r, err := env.Run.Serial(nameWSCAS, env.Ops, c.op)
	if err = errors.Join(err, c.close()); err != nil {
		return nil, err
	}
	r.Note = fmt.Sprintf("n=%d owners=%d doc=%dB %s", env.Ops, casKeys, harness.DocBytes, wsCASNote)
	return []harness.Result{r}, nil
}

// ownerOf is the owner writer wr of writers compare-and-sets in its i-th
// operation: writer wr owns the owners k with k%writers == wr, in turn,
// as durable_cas_concurrent partitions them.
func ownerOf(wr, i, writers int) int {
	owned := (casKeys - wr + writers - 1) / writers
	return wr + (i%owned)*writers
}

// runWSCASConcurrent is durable_cas_concurrent through client/: per
// writer count, a fresh store and server, writer w compare-and-setting its
// owners through their clients. The 127 connections are partitioned like
// the owners, so no writer shares a connection with another.
func runWSCASConcurrent(env *Env) ([]harness.Result, error) {
	var out []harness.Result
	for _, w := range env.Writers {
		if w > casKeys {
			return out, fmt.Errorf("%d writers exceed %d owners", w, casKeys)
		}
		s, err := openScratch(env, nameWSCASConcurrent, statestore.Options{})
		if err != nil {
			return out, err
		}
		c, err := newWSCAS(s)
		if err != nil {
			return out, errors.Join(err, s.Close())
		}
		writers := w
		r, err := env.Run.RunBudget(nameWSCASConcurrent, writers, env.Budget, func(wr, i int) error { return c.put(ownerOf(wr, i, writers)) })
		if err = errors.Join(err, c.close(), s.Close()); err != nil {
			return out, err
		}
		r.Note += fmt.Sprintf(" owners=%d doc=%dB %s", casKeys, harness.DocBytes, wsCASNote)
		env.Logf("%s writers=%d: %.0f ops/s", r.Name, w, r.OpsPerS)
		out = append(out, r)
	}
	return out, nil
}

// newTCPCAS is the floor over loopback TCP: one connection per owner
// through a listener on 127.0.0.1:0, closed with the floor.
func newTCPCAS(s *statestore.Store, owners []*casOwner) (*floorCAS, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%s: listen on 127.0.0.1: %w", nameTCPCASFloor, err)
	}
	c, err := newFloorCAS(s, owners, func() (net.Conn, net.Conn, error) { return tcpPair(ln) })
	if err != nil {
		return nil, errors.Join(err, ln.Close())
	}
	c.release = ln.Close
	return c, nil
}

// tcpPair dials ln and accepts that connection, checking that the one
// accepted is the one dialled (another process could connect to the
// port).
func tcpPair(ln net.Listener) (net.Conn, net.Conn, error) {
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, nil, fmt.Errorf("%s: dial %s: %w", nameTCPCASFloor, ln.Addr(), err)
	}
	srv, err := ln.Accept()
	if err != nil {
		cli.Close()
		return nil, nil, fmt.Errorf("%s: accept on %s: %w", nameTCPCASFloor, ln.Addr(), err)
	}
	if srv.RemoteAddr().String() != cli.LocalAddr().String() {
		srv.Close()
		cli.Close()
		return nil, nil, fmt.Errorf("%s: %s accepted %s, not the dialled %s", nameTCPCASFloor, ln.Addr(), srv.RemoteAddr(), cli.LocalAddr())
	}
	return srv, cli, nil
}

const tcpFloorNote = "fixed %d-byte request and answer over loopback TCP, no protocol, one connection per owner"

// runTCPCASFloor is ws_cas's transport floor on its own.
func runTCPCASFloor(env *Env) ([]harness.Result, error) {
	s, err := openScratch(env, nameTCPCASFloor, statestore.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	c, err := newTCPCAS(s, newOwners(casKeys))
	if err != nil {
		return nil, err
	}
	r, err := env.Run.Serial(nameTCPCASFloor, env.Ops, c.op)
	if err = errors.Join(err, c.close()); err != nil {
		return nil, err
	}
	r.Note = fmt.Sprintf("n=%d owners=%d "+tcpFloorNote, env.Ops, casKeys, floorFrame)
	return []harness.Result{r}, nil
}

// etcdGRPCNote says what etcd_grpc_cas is, and that its durability is the
// store's.
const etcdGRPCNote = "embedded single member, client/v3 over gRPC on loopback TCP, WAL fsynced per commit (etcd's default)"

// natsNote says what nats_kv_cas is, and that its durability is the
// store's.
const natsNote = "embedded nats-server, JetStream KV on file storage, nats.go over loopback TCP, SyncAlways (fsync per write before the publish is answered)"

// openNATS opens the NATS JetStream KV peer with conns connections.
func openNATS(conns int) openPeer {
	return func(dir string) (casPeer, error) { return natspeer.Open(dir, casKeys, harness.DocBytes, conns) }
}

// openEtcdGRPC opens the etcd peer reached over gRPC with conns
// connections.
func openEtcdGRPC(conns int) openPeer {
	return func(dir string) (casPeer, error) { return etcdpeer.OpenGRPC(dir, casKeys, harness.DocBytes, conns) }
}

// runNetworkSerial alternates, in rounds of one compare-and-set per owner,
// the in-process CAS, its two wire transports (wire_cas over net.Pipe,
// ws_cas over WebSocket), their floors (pipe_cas_floor, tcp_cas_floor)
// etcd both ways (etcd_grpc_cas, etcd_cas) and NATS JetStream KV
// (nats_kv_cas), each on a store, member or server of its own, env.Ops operations each.
func runNetworkSerial(env *Env) (out []harness.Result, err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	var sides []harness.SerialSide
	side := func(name string, op func(int) error) {
		sides = append(sides, harness.SerialSide{Name: report.Network(name), Op: op})
	}
	s, err := openIn(env, &cl, nameDurableCAS, openStore)
	if err != nil {
		return nil, err
	}
	owners := newOwners(casKeys)
	side(nameDurableCAS, func(i int) error { return owners[i%casKeys].CAS(s) })

	wired, err := openIn(env, &cl, nameWireCAS, openStore)
	if err != nil {
		return nil, err
	}
	wire := newWireCAS(dispatch.New(wired, dispatch.Options{}))
	cl = append(cl, wire.close)
	side(nameWireCAS, wire.op)

	for _, f := range []struct {
		name string
		open func(*statestore.Store, []*casOwner) (*floorCAS, error)
	}{{namePipeCASFloor, newPipeCAS}, {nameTCPCASFloor, newTCPCAS}} {
		fs, err := openIn(env, &cl, f.name, openStore)
		if err != nil {
			return nil, err
		}
		floor, err := f.open(fs, newOwners(casKeys))
		if err != nil {
			return nil, err
		}
		cl = append(cl, floor.close)
		side(f.name, floor.op)
	}

	wss, err := openIn(env, &cl, nameWSCAS, openStore)
	if err != nil {
		return nil, err
	}
	ws, err := newWSCAS(wss)
	if err != nil {
		return nil, err
	}
	cl = append(cl, ws.close)
	side(nameWSCAS, ws.op)

	for _, p := range []struct {
		name string
		open openPeer
	}{{etcdpeer.NameGRPCCAS, openEtcdGRPC(1)}, {natspeer.NameCAS, openNATS(1)}, {etcdpeer.NameCAS, openEtcd}} {
		db, err := openIn(env, &cl, p.name, p.open)
		if err != nil {
			return nil, err
		}
		side(p.name, func(i int) error { return db.CAS(i % casKeys) })
	}
	return env.Run.AlternateSerial(sides, casRounds(env), casKeys)
}

// runNetworkConcurrent alternates bursts of 127 writers of the in-process
// concurrent CAS, the same through client/ over WebSocket, etcd both
// ways (over gRPC with one connection per writer, and in process) and
// NATS JetStream KV (one connection per writer).
func runNetworkConcurrent(env *Env) (out []harness.Result, err error) {
	const writers = report.TargetWriters
	if writers > casKeys {
		return nil, fmt.Errorf("%d writers exceed %d owners", writers, casKeys)
	}
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	var sides []harness.ConcurrentSide
	side := func(name string, op func(wr, i int) error) {
		sides = append(sides, harness.ConcurrentSide{Name: report.Network(name), Op: op})
	}
	s, err := openIn(env, &cl, nameDurableCASConcurrent, openStore)
	if err != nil {
		return nil, err
	}
	owners := newOwners(casKeys)
	side(nameDurableCASConcurrent, func(wr, i int) error { return owners[ownerOf(wr, i, writers)].CAS(s) })

	wss, err := openIn(env, &cl, nameWSCASConcurrent, openStore)
	if err != nil {
		return nil, err
	}
	ws, err := newWSCAS(wss)
	if err != nil {
		return nil, err
	}
	cl = append(cl, ws.close)
	side(nameWSCASConcurrent, func(wr, i int) error { return ws.put(ownerOf(wr, i, writers)) })

	for _, p := range []struct {
		name string
		open openPeer
	}{{etcdpeer.NameGRPCCASConcurrent, openEtcdGRPC(writers)}, {natspeer.NameCASConcurrent, openNATS(writers)}, {etcdpeer.NameCASConcurrent, openEtcd}} {
		db, err := openIn(env, &cl, p.name, p.open)
		if err != nil {
			return nil, err
		}
		side(p.name, func(wr, i int) error { return db.CAS(ownerOf(wr, i, writers)) })
	}
	return env.Run.AlternateConcurrent(sides, writers, targetBursts, burstOf(env))
}
