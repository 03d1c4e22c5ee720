// Package etcdpeer is an embedded etcd peer for the statestore
// qualification benchmarks: the same compare-and-set workload as the
// store's durable_cas, against a single-member etcd server running in this
// process (go.etcd.io/etcd/server/v3/embed) through its in-process client
// (v3client: no network hop, no gRPC transport). etcd fsyncs its raft WAL
// before it applies and answers a write, so a CAS that returns is durable.
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
//     Tests: TestCAS.
package etcdpeer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
)

// Workload names, as they appear in results and in qualify's --only flag.
const (
	NameCAS           = "etcd_cas"
	NameCASConcurrent = "etcd_cas_concurrent"
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
	etcd *embed.Etcd
	cli  *clientv3.Client
	revs []int64
	body string
}

// Open starts a fresh single-member etcd with its data in dir, listening
// on loopback ports it picks, and creates keys documents of docSize bytes.
func Open(dir string, keys, docSize int) (*DB, error) {
	if keys <= 0 || docSize <= 0 {
		return nil, fmt.Errorf("etcdpeer: keys %d and docSize %d must be positive", keys, docSize)
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	// Closing the member logs its listeners' accept errors at error level.
	cfg.LogLevel = "fatal"
	cfg.Logger = "zap"
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
	if err != nil {
		return nil, fmt.Errorf("etcdpeer: start: %w", err)
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
	d := &DB{etcd: e, cli: v3client.New(e.Server), revs: make([]int64, keys)}
	body := make([]byte, docSize)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	d.body = string(body)
	for k := 0; k < keys; k++ {
		resp, err := d.cli.Put(context.Background(), keyOf(k), d.body)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("etcdpeer: create document %d: %w", k, err)
		}
		d.revs[k] = resp.Header.Revision
	}
	return d, nil
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

// CAS replaces document key, expecting its current ModRevision. It
// returns once etcd committed the transaction.
func (d *DB) CAS(key int) error {
	k := keyOf(key)
	resp, err := d.cli.Txn(context.Background()).
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

// Close stops the client and the member.
func (d *DB) Close() error {
	err := d.cli.Close()
	if errors.Is(err, context.Canceled) {
		// The in-process client reports its own cancellation on Close.
		err = nil
	}
	d.etcd.Close()
	return err
}
