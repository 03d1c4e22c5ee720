// Package natspeer is an embedded NATS JetStream key-value peer for the
// statestore qualification benchmarks: the compare-and-set workload of the
// store's ws_cas, against a nats-server running in this process
// (github.com/nats-io/nats-server/v2) and reached as a remote user reaches
// it, through github.com/nats-io/nats.go over loopback TCP.
//
// Durability is the store's: the server runs with SyncAlways (the
// configuration file's "sync: always"), so JetStream's file store fsyncs
// the message block after every write and before it answers the publish,
// as the journal fdatasyncs a commit before its answer. Open's bucket has
// one replica, so nothing relaxes that to a sync on flush; OpenCluster's
// has one on each of its servers, every one syncing before it
// acknowledges, and JetStream answers once a quorum of them stored the
// update (the peer of the store's three-node cluster).
//
// One CAS is
//
//	kv.Update(key, body, lastRevision)
//
// which JetStream applies only when the key's last revision (its stream
// sequence) is lastRevision; the new revision is the next expectation. The
// documents are made with kv.Create.
//
// # Invariants
//
//  1. A CAS returns nil only after JetStream stored (and, SyncAlways,
//     fsynced) the update, and only when the key's revision was the
//     expected one.
//     Code: DB.CAS, serverOptions.
//     Tests: TestCAS, TestServerSyncsEveryWrite.
//  2. Every CAS and watch is reached over a TCP connection to the server's
//     127.0.0.1 listener, key k on connection k mod conns, so W writers
//     partitioning the keys by key mod W each use a connection of their
//     own.
//     Code: Open, DB.conn, DB.Watch.
//     Tests: TestCAS, TestOpenRefusesBadSizes.
//  3. A watcher returned by Watch is registered with the server before
//     Watch returns: it sees every later update of its key, and none from
//     before.
//     Code: DB.Watch.
//     Tests: TestWatchSeesEveryLaterUpdate.
//  4. A DB from OpenCluster runs that many servers routed into one
//     JetStream cluster, each with SyncAlways, its bucket replicated on
//     every server, and connection i to server i mod servers: a CAS is
//     answered once a quorum of replicas fsynced it.
//     Code: OpenCluster, createBucket, awaitMetaLeader.
//     Tests: TestClusterReplicatesEveryDocument.
package natspeer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Workload names, as they appear in results and in qualify's --only flag.
const (
	NameCAS           = "nats_kv_cas"
	NameCASConcurrent = "nats_kv_cas_concurrent"
	NameWatchFanout   = "nats_kv_watch_fanout"
)

// ErrConflict is returned by CAS when the key's revision was not the one
// expected, which the benchmark never provokes.
var ErrConflict = errors.New("natspeer: compare-and-set conflict")

// bucket is the key-value bucket every document lives in.
const bucket = "docs"

// startTimeout bounds how long Open waits for the server to accept
// connections; callTimeout bounds one client call.
const (
	startTimeout = 30 * time.Second
	callTimeout  = 30 * time.Second
)

// DB is a benchmark store of keys documents of docSize bytes in one
// JetStream KV bucket. It tracks each key's expected revision; a key must
// be used by one goroutine at a time.
type DB struct {
	// srvs is the one server (Open) or every server of OpenCluster's
	// cluster.
	srvs []*server.Server
	// ncs and kvs are the connections and their bucket handles; key k
	// uses kvs[k%len(kvs)].
	ncs  []*nats.Conn
	kvs  []jetstream.KeyValue
	revs []uint64
	body []byte

	// ctx is the watchers' life, cancelled by Close.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	watchers []jetstream.KeyWatcher

	closeOnce sync.Once
	closeErr  error
}

// serverOptions is the embedded server: JetStream on file storage in dir,
// syncing every write, listening on a random 127.0.0.1 port, quiet.
func serverOptions(dir string) *server.Options {
	return &server.Options{
		ServerName: "natspeer",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   dir,
		// The server's "sync: always": fsync after every write, before
		// the publish is acknowledged (the default syncs every two
		// minutes).
		SyncAlways: true,
		// A KV key watcher is a consumer of the bucket's stream, and the
		// fan-out holds 1,024 of them: above the default of 1,000 per
		// stream.
		JetStreamLimits: server.JSLimitOpts{DefaultMaxConsumers: -1},
		NoLog:           true,
		NoSigs:          true,
		// No HTTP monitoring, cluster or leaf listeners.
		HTTPPort: 0,
	}
}

// Open starts a fresh server with its store in dir, connects conns
// clients over loopback TCP, and creates keys documents of docSize bytes.
func Open(dir string, keys, docSize, conns int) (*DB, error) {
	if keys <= 0 || docSize <= 0 || conns <= 0 {
		return nil, fmt.Errorf("natspeer: keys %d, docSize %d and conns %d must be positive", keys, docSize, conns)
	}
	store := filepath.Join(dir, "jetstream")
	if err := os.MkdirAll(store, 0o700); err != nil {
		return nil, fmt.Errorf("natspeer: store directory: %w", err)
	}
	srv, err := server.NewServer(serverOptions(store))
	if err != nil {
		return nil, fmt.Errorf("natspeer: server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(startTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("natspeer: server not ready within %v", startTimeout)
	}
	return populate([]*server.Server{srv}, keys, docSize, conns, 1)
}

// populate makes the DB of srvs, connects conns clients (client i to
// server i mod len(srvs)), creates the bucket with replicas replicas and
// its documents, closing everything on failure.
func populate(srvs []*server.Server, keys, docSize, conns, replicas int) (*DB, error) {
	d := &DB{srvs: srvs, revs: make([]uint64, keys)}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if err := d.connect(conns, replicas); err != nil {
		d.Close()
		return nil, err
	}
	body := make([]byte, docSize)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	d.body = body
	for k := range keys {
		rev, err := d.create(k)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("natspeer: create document %d: %w", k, err)
		}
		d.revs[k] = rev
	}
	return d, nil
}

// create writes document k for the first time and returns its revision.
// Right after the bucket is made, a replicated stream may still change
// leader, and a publish then goes unanswered ("no response from stream")
// though it may have been stored: a retry that finds the key exists reads
// the revision it was stored at. Bounded by callTimeout as a whole.
func (d *DB) create(k int) (rev uint64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	err = retryWhileElecting(ctx, len(d.srvs), func(ctx context.Context) error {
		rev, err = d.conn(k).Create(ctx, keyOf(k), d.body)
		if errors.Is(err, jetstream.ErrKeyExists) {
			var e jetstream.KeyValueEntry
			if e, err = d.conn(k).Get(ctx, keyOf(k)); err == nil {
				rev = e.Revision()
			}
		}
		return err
	})
	return rev, err
}

// connect makes conns client connections and the bucket, file storage
// with replicas replicas and no history beyond the last value.
func (d *DB) connect(conns, replicas int) error {
	for i := range conns {
		url := d.srvs[i%len(d.srvs)].ClientURL()
		nc, err := nats.Connect(url, nats.Name(fmt.Sprintf("natspeer-%d", i)), nats.MaxReconnects(0))
		if err != nil {
			return fmt.Errorf("natspeer: connection %d to %s: %w", i, url, err)
		}
		d.ncs = append(d.ncs, nc)
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("natspeer: connection %d: JetStream: %w", i, err)
		}
		// Each connection's bucket has its own bound: one shared by all
		// left the last lookups whatever the creation's retries spared.
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		var kv jetstream.KeyValue
		if i == 0 {
			kv, err = createBucket(ctx, js, replicas)
		} else {
			kv, err = lookupBucket(ctx, js, replicas)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("natspeer: connection %d: bucket %s: %w", i, bucket, err)
		}
		d.kvs = append(d.kvs, kv)
	}
	return nil
}

func keyOf(k int) string { return fmt.Sprintf("docs.%04d", k) }

// Keys returns the number of documents.
func (d *DB) Keys() int { return len(d.revs) }

// URL returns the address the clients reach the server at.
func (d *DB) URL() string { return d.srvs[0].ClientURL() }

// Revision returns the revision document key was last written at.
func (d *DB) Revision(key int) uint64 { return d.revs[key] }

// conn is the bucket handle key k is read and written through.
func (d *DB) conn(k int) jetstream.KeyValue { return d.kvs[k%len(d.kvs)] }

// CAS replaces document key, expecting its current revision. It returns
// once JetStream acknowledged the stored update.
func (d *DB) CAS(key int) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	rev, err := d.conn(key).Update(ctx, keyOf(key), d.body, d.revs[key])
	if republished(err) {
		// nats.go publishes again when the first publish met no
		// responders (a stream electing a leader), and a first copy that
		// was stored makes the second a revision conflict. Each key has
		// one owner here, so a newer revision holding this update's body
		// is this update.
		if e, gerr := d.conn(key).Get(ctx, keyOf(key)); gerr == nil && e.Revision() > d.revs[key] && bytes.Equal(e.Value(), d.body) {
			rev, err = e.Revision(), nil
		}
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("%w: key %d revision %d: %w", ErrConflict, key, d.revs[key], err)
		}
		return fmt.Errorf("natspeer: update key %d: %w", key, err)
	}
	d.revs[key] = rev
	return nil
}

// republished reports whether err is the revision conflict a repeated
// publish meets on a replicated stream: JetStream's code 10164. A stale
// revision answers 10071 (TestCAS's); nats.go marks both
// ErrKeyRevisionMismatch.
func republished(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// Watch starts a watcher of document key on connection conn mod conns,
// registered before it returns, and calls seen with each later update's
// revision, on a goroutine of its own, until Close. The initial value is
// not delivered.
func (d *DB) Watch(key, conn int, seen func(revision uint64)) error {
	// The context is the watcher's life (nats.go unsubscribes when it
	// ends), so it is the DB's; the connection's request timeout bounds
	// the consumer's creation.
	w, err := d.kvs[conn%len(d.kvs)].Watch(d.ctx, keyOf(key), jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("natspeer: watch key %d on connection %d: %w", key, conn%len(d.kvs), err)
	}
	d.mu.Lock()
	d.watchers = append(d.watchers, w)
	d.mu.Unlock()
	go func() {
		for e := range w.Updates() {
			if e != nil {
				seen(e.Revision())
			}
		}
	}()
	return nil
}

// Close stops the watchers, the connections and the server. It is
// idempotent, so a test may defer it and also check it.
func (d *DB) Close() error {
	d.closeOnce.Do(func() {
		var errs []error
		d.mu.Lock()
		for _, w := range d.watchers {
			if err := w.Stop(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
				errs = append(errs, err)
			}
		}
		d.watchers = nil
		d.mu.Unlock()
		d.cancel()
		for _, nc := range d.ncs {
			nc.Close()
		}
		for _, srv := range d.srvs {
			srv.Shutdown()
		}
		for _, srv := range d.srvs {
			srv.WaitForShutdown()
		}
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}
