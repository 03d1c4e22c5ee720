package natspeer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/keeppeek/statestore/internal/loopback"
)

// The cluster workloads: the same compare-and-set against a bucket of
// three replicas on OpenCluster's servers.
const (
	NameR3CAS           = "nats_kv_r3_cas"
	NameR3CASConcurrent = "nats_kv_r3_cas_concurrent"
)

// clusterName is the route cluster OpenCluster's servers form.
const clusterName = "natspeer"

// retryPause spaces the attempts of createBucket while the cluster elects
// its meta leader and then the stream's.
const retryPause = 50 * time.Millisecond

// OpenCluster starts servers embedded nats-servers in this process, routed
// into one JetStream cluster on loopback (server i storing in
// dir/server-i, SyncAlways as Open's), connects conns clients over TCP
// (client i to server i mod servers), and creates keys documents of
// docSize bytes in a bucket replicated on every server. JetStream answers
// an update once a quorum of the stream's replicas stored it, each
// fsyncing it first (SyncAlways), so a CAS that returns is on the disks of
// a quorum.
func OpenCluster(dir string, servers, keys, docSize, conns int) (*DB, error) {
	if servers <= 0 || keys <= 0 || docSize <= 0 || conns <= 0 {
		return nil, fmt.Errorf("natspeer: servers %d, keys %d, docSize %d and conns %d must be positive", servers, keys, docSize, conns)
	}
	ports, err := loopback.FreePorts(servers)
	if err != nil {
		return nil, err
	}
	var srvs []*server.Server
	shutdown := func() {
		for _, s := range srvs {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	for i := range servers {
		store := filepath.Join(dir, "server-"+strconv.Itoa(i), "jetstream")
		if err := os.MkdirAll(store, 0o700); err != nil {
			shutdown()
			return nil, fmt.Errorf("natspeer: store directory: %w", err)
		}
		opts := serverOptions(store)
		opts.ServerName = fmt.Sprintf("natspeer-%d", i)
		opts.Cluster = server.ClusterOpts{Name: clusterName, Host: "127.0.0.1", Port: ports[i]}
		for j, p := range ports {
			if j != i {
				opts.Routes = append(opts.Routes, server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", p))...)
			}
		}
		srv, err := server.NewServer(opts)
		if err != nil {
			shutdown()
			return nil, fmt.Errorf("natspeer: server %d: %w", i, err)
		}
		srv.Start()
		srvs = append(srvs, srv)
	}
	for i, srv := range srvs {
		if !srv.ReadyForConnections(startTimeout) {
			shutdown()
			return nil, fmt.Errorf("natspeer: server %d not ready within %v", i, startTimeout)
		}
	}
	if err := awaitMetaLeader(srvs); err != nil {
		shutdown()
		return nil, err
	}
	return populate(srvs, keys, docSize, conns, servers)
}

// awaitMetaLeader waits, bounded by startTimeout, until one server leads
// JetStream's meta group and every server is current with it: before
// that, a request to create a stream waits for an answer that never
// comes.
func awaitMetaLeader(srvs []*server.Server) error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		leaders, current := 0, 0
		for _, s := range srvs {
			if s.JetStreamIsLeader() {
				leaders++
			}
			if s.JetStreamIsCurrent() {
				current++
			}
		}
		if leaders == 1 && current == len(srvs) {
			return nil
		}
		time.Sleep(retryPause) // polling the servers' state: bounded by deadline
	}
	return fmt.Errorf("natspeer: no JetStream meta leader among %d servers within %v", len(srvs), startTimeout)
}

// createBucket creates the bucket, trying again until ctx ends while a
// cluster has no JetStream meta leader yet, and returns once the bucket's
// stream answers (it has a leader).
func createBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	var last error
	for ctx.Err() == nil {
		// One attempt may wait for an answer that a stream leader
		// elected meanwhile never sends: each is bounded on its own.
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		kv, err := js.CreateKeyValue(actx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, Storage: jetstream.FileStorage, Replicas: replicas})
		if err == nil {
			_, err = kv.Status(actx)
		}
		cancel()
		if err == nil {
			return kv, nil
		}
		last = err
		if replicas == 1 {
			break // a single server has its meta leader from the start
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryPause):
		}
	}
	return nil, fmt.Errorf("natspeer: create bucket with %d replicas: %w", replicas, last)
}

// lookupBucket opens the bucket on another connection, trying again until
// ctx ends: right after creation a replicated stream may still change
// leader, and a lookup then waits for an answer that never comes (seen
// under -race on a loaded machine: "context deadline exceeded").
func lookupBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	var last error
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		kv, err := js.KeyValue(actx, bucket)
		cancel()
		if err == nil {
			return kv, nil
		}
		last = err
		if replicas == 1 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryPause):
		}
	}
	return nil, fmt.Errorf("natspeer: open bucket with %d replicas: %w", replicas, last)
}

// Servers returns the number of servers the DB runs.
func (d *DB) Servers() int { return len(d.srvs) }
