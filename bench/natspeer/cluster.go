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

// retryWhileElecting runs attempt, each bounded by attemptTimeout, until
// it succeeds or ctx ends. Right after a cluster starts or a replicated
// stream is made, JetStream may still elect a leader, and a request then
// waits for an answer that never comes; a single server (replicas 1) has
// its leaders from the start, so its first failure is final.
func retryWhileElecting(ctx context.Context, replicas int, attempt func(ctx context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := attempt(actx)
		cancel()
		if err == nil || replicas == 1 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-time.After(retryPause):
		}
	}
}

// attemptTimeout bounds one attempt of retryWhileElecting.
const attemptTimeout = 2 * time.Second

// createBucket creates the bucket and returns once its stream answers (it
// has a leader).
func createBucket(ctx context.Context, js jetstream.JetStream, replicas int) (kv jetstream.KeyValue, err error) {
	err = retryWhileElecting(ctx, replicas, func(ctx context.Context) error {
		if kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
			return err
		}
		_, err = kv.Status(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("natspeer: create bucket with %d replicas: %w", replicas, err)
	}
	return kv, nil
}

// lookupBucket opens the bucket on another connection (a lookup right
// after creation waited out a whole call under -race on a loaded machine:
// "context deadline exceeded").
func lookupBucket(ctx context.Context, js jetstream.JetStream, replicas int) (kv jetstream.KeyValue, err error) {
	err = retryWhileElecting(ctx, replicas, func(ctx context.Context) error {
		kv, err = js.KeyValue(ctx, bucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("natspeer: open bucket with %d replicas: %w", replicas, err)
	}
	return kv, nil
}

// Servers returns the number of servers the DB runs.
func (d *DB) Servers() int { return len(d.srvs) }
