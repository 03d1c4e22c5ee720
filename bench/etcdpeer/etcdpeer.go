// Package etcdpeer is an embedded etcd peer for the statestore
// qualification benchmarks: the same compare-and-set workload as the
// store's durable_cas, against a single-member etcd server running in this
// process (go.etcd.io/etcd/server/v3/embed). [Open] reaches it through its
// in-process client (v3client: no network hop, no gRPC transport), the
// peer of the store called in process; [OpenGRPC] through
// go.etcd.io/etcd/client/v3 over gRPC on the member's loopback TCP client
// listener, the peer a remote user would pick, set against the store
// reached over WebSocket. etcd fsyncs its raft WAL before it applies and
// answers a write (embed's default; UnsafeNoFsync is left false), so a CAS
// that returns is durable, as one of the store's is.
//
// One CAS is the transaction
//
//	If(ModRevision(key) == expected) Then(Put(key, body))
//
// and succeeds only when the comparison held; the new ModRevision is the
// next expectation.
//
// # Invariants
//
//  1. A CAS returns nil only after etcd committed the put, and only when
//     the key's ModRevision was the expected one.
//     Code: DB.CAS.
//     Tests: TestCAS, TestGRPCCAS.
//  2. A DB from OpenGRPC has no in-process client: every CAS is a gRPC
//     call over a TCP connection to the member's loopback client listener,
//     on connection key mod conns, so W writers partitioning the keys by
//     key mod W each use a connection of their own.
//     Code: OpenGRPC, dialGRPC, DB.CAS.
//     Tests: TestGRPCCAS, TestOpenGRPCRefusesBadSizes.
//  3. A watcher returned by Watch is registered with the member before
//     Watch returns (etcd's created notification): it sees every later
//     put of its key, and none from before.
//     Code: DB.Watch.
//     Tests: TestWatchSeesEveryLaterPut.
//  4. A DB from OpenCluster runs that many members of one cluster in
//     this process, each fsyncing its WAL, and client i reaches member
//     i mod members over gRPC: a CAS commits on a quorum's disks,
//     through whichever member its client reaches.
//     Code: OpenCluster, DB.Members.
//     Tests: TestClusterHasThreeMembers.
package etcdpeer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
)

// Workload names, as they appear in results and in qualify's --only flag.
const (
	NameCAS           = "etcd_cas"
	NameCASConcurrent = "etcd_cas_concurrent"
	// NameGRPCCAS and NameGRPCCASConcurrent are the same workloads
	// through OpenGRPC's network clients.
	NameGRPCCAS           = "etcd_grpc_cas"
	NameGRPCCASConcurrent = "etcd_grpc_cas_concurrent"
	// NameWatchFanout is 1,024 watchers of one key over gRPC.
	NameWatchFanout = "etcd_watch_fanout"
)

// ErrConflict is returned by CAS when the key's ModRevision was not the
// one expected, which the benchmark never provokes.
var ErrConflict = errors.New("etcdpeer: compare-and-set conflict")

// startTimeout bounds how long Open waits for the member to serve.
const startTimeout = 60 * time.Second

// DB is a benchmark store of keys documents of docSize bytes. It tracks
// each key's expected ModRevision; a key must be used by one goroutine at a
// time.
type DB struct {
	// etcds is the one member (Open, OpenGRPC) or every member of
	// OpenCluster's cluster.
	etcds []*embed.Etcd
	// clis holds one in-process client (Open) or OpenGRPC's network
	// clients; key k uses clis[k%len(clis)].
	clis []*clientv3.Client
	revs []int64
	body string

	// ctx is the watchers' life, cancelled by Close.
	ctx    context.Context
	cancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// Open starts a fresh single-member etcd with its data in dir, listening
// on loopback ports it picks, and creates keys documents of docSize bytes
// through the member's in-process client.
func Open(dir string, keys, docSize int) (*DB, error) {
	if keys <= 0 || docSize <= 0 {
		return nil, fmt.Errorf("etcdpeer: keys %d and docSize %d must be positive", keys, docSize)
	}
	return open(dir, keys, docSize, func(e *embed.Etcd) ([]*clientv3.Client, error) {
		return []*clientv3.Client{v3client.New(e.Server)}, nil
	})
}

// dialTimeout bounds what clientv3 bounds with its DialTimeout (its
// connection itself is made on the first call).
const dialTimeout = 10 * time.Second

// OpenGRPC is Open with the documents reached over the network: conns
// clients of go.etcd.io/etcd/client/v3, each with its own gRPC connection
// to the member's client listener on 127.0.0.1, key k on client k%conns.
func OpenGRPC(dir string, keys, docSize, conns int) (*DB, error) {
	if keys <= 0 || docSize <= 0 || conns <= 0 {
		return nil, fmt.Errorf("etcdpeer: keys %d, docSize %d and conns %d must be positive", keys, docSize, conns)
	}
	return open(dir, keys, docSize, func(e *embed.Etcd) ([]*clientv3.Client, error) { return dialGRPC(e, conns) })
}

// dialGRPC makes conns network clients of e's first client listener. A
// client per connection, since one clientv3.Client multiplexes all its
// calls on one gRPC connection.
func dialGRPC(e *embed.Etcd, conns int) ([]*clientv3.Client, error) {
	if len(e.Clients) == 0 {
		return nil, errors.New("etcdpeer: the member has no client listener")
	}
	endpoint := e.Clients[0].Addr().String()
	clis := make([]*clientv3.Client, 0, conns)
	for range conns {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: dialTimeout, Logger: zap.NewNop()})
		if err != nil {
			for _, c := range clis {
				c.Close()
			}
			return nil, fmt.Errorf("etcdpeer: client of %s: %w", endpoint, err)
		}
		clis = append(clis, cli)
	}
	return clis, nil
}

// open starts the member, makes its clients with clients, and creates the
// documents.
func open(dir string, keys, docSize int, clients func(*embed.Etcd) ([]*clientv3.Client, error)) (*DB, error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	// The default, stated: the WAL is fsynced before a write is applied
	// and answered, so etcd's durability is the store's.
	cfg.UnsafeNoFsync = false
	// Closing the member logs its listeners' accept errors at error level.
	cfg.LogLevel = "fatal"
	cfg.Logger = "zap"
	e, err := startOnFreePorts(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdpeer: member failed to start: %w", err)
	case <-time.After(startTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("etcdpeer: member not ready within %v", startTimeout)
	}
	clis, err := clients(e)
	if err != nil {
		e.Close()
		return nil, err
	}
	return populate([]*embed.Etcd{e}, clis, keys, docSize)
}

// populate makes the DB of members reached through clis and creates its
// documents, closing everything if one cannot be created.
func populate(members []*embed.Etcd, clis []*clientv3.Client, keys, docSize int) (*DB, error) {
	d := &DB{etcds: members, clis: clis, revs: make([]int64, keys)}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	body := make([]byte, docSize)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	d.body = string(body)
	for k := 0; k < keys; k++ {
		resp, err := d.client(k).Put(context.Background(), keyOf(k), d.body)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("etcdpeer: create document %d: %w", k, err)
		}
		d.revs[k] = resp.Header.Revision
	}
	return d, nil
}

// portAttempts bounds startOnFreePorts.
const portAttempts = 5

// startOnFreePorts starts the member on two loopback ports that were free
// a moment ago. Another process (a parallel test) may take one between
// the pick and etcd's bind, so a bind refused with EADDRINUSE is tried
// again on new ports, at most portAttempts times.
func startOnFreePorts(cfg *embed.Config) (*embed.Etcd, error) {
	for attempt := 1; ; attempt++ {
		peer, err := freeURL()
		if err != nil {
			return nil, err
		}
		client, err := freeURL()
		if err != nil {
			return nil, err
		}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		e, err := embed.StartEtcd(cfg)
		if err == nil {
			return e, nil
		}
		inUse := errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
		if !inUse || attempt == portAttempts {
			return nil, fmt.Errorf("etcdpeer: start (attempt %d of %d): %w", attempt, portAttempts, err)
		}
	}
}

// freeURL returns an http URL on a loopback port that was free a moment ago.
func freeURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, fmt.Errorf("etcdpeer: pick a port: %w", err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

func keyOf(k int) string { return fmt.Sprintf("docs/%04d", k) }

// Keys returns the number of documents.
func (d *DB) Keys() int { return len(d.revs) }

// Endpoints returns, per client, the address it reaches the member at
// (empty for the in-process client).
func (d *DB) Endpoints() [][]string {
	out := make([][]string, len(d.clis))
	for i, c := range d.clis {
		out[i] = c.Endpoints()
	}
	return out
}

// client is the client key k is read and written through.
func (d *DB) client(k int) *clientv3.Client { return d.clis[k%len(d.clis)] }

// CAS replaces document key, expecting its current ModRevision. It
// returns once etcd committed the transaction.
func (d *DB) CAS(key int) error {
	k := keyOf(key)
	resp, err := d.client(key).Txn(context.Background()).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", d.revs[key])).
		Then(clientv3.OpPut(k, d.body)).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: key %d mod revision %d", ErrConflict, key, d.revs[key])
	}
	d.revs[key] = resp.Header.Revision
	return nil
}

// Revision returns the ModRevision document key was last written at.
func (d *DB) Revision(key int) int64 { return d.revs[key] }

// Watch starts a watcher of document key on client conn mod clients,
// registered before it returns, and calls seen with each later put's
// ModRevision, on a goroutine of its own, until Close. Watchers of one
// client share its gRPC connection and watch stream (clientv3 multiplexes
// them), as a remote user's would.
func (d *DB) Watch(key, conn int, seen func(revision int64)) error {
	cli := d.clis[conn%len(d.clis)]
	ch := cli.Watch(d.ctx, keyOf(key), clientv3.WithCreatedNotify())
	select {
	case resp, ok := <-ch:
		if !ok || !resp.Created {
			return fmt.Errorf("etcdpeer: watch key %d on client %d: no created notification (%v)", key, conn%len(d.clis), resp.Err())
		}
	case <-time.After(dialTimeout):
		return fmt.Errorf("etcdpeer: watch key %d on client %d: not created within %v", key, conn%len(d.clis), dialTimeout)
	}
	go func() {
		for resp := range ch {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					seen(ev.Kv.ModRevision)
				}
			}
		}
	}()
	return nil
}

// Close stops the clients and the member. It is idempotent (embed's own
// Close is not), so a test may defer it and also check it.
func (d *DB) Close() error {
	d.closeOnce.Do(func() {
		var errs []error
		d.cancel()
		for _, c := range d.clis {
			if err := c.Close(); err != nil && !errors.Is(err, context.Canceled) {
				// The clients report their own cancellation on Close.
				errs = append(errs, err)
			}
		}
		for _, e := range d.etcds {
			e.Close()
		}
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}
