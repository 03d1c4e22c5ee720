package etcdpeer

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/keeppeek/statestore/internal/loopback"
)

// The cluster workloads: the same compare-and-set against a cluster of
// OpenCluster's members over gRPC.
const (
	NameClusterCAS           = "etcd_cluster_cas"
	NameClusterCASConcurrent = "etcd_cluster_cas_concurrent"
)

// OpenCluster starts members embedded etcd members in this process, one
// cluster on loopback (member i in dir/member-i, its peer and client
// listeners on ports picked at once), and makes conns clients of
// go.etcd.io/etcd/client/v3, client i with its own gRPC connection to
// member i mod members: the writers of a partitioned workload spread over
// every member, followers forwarding to the leader as etcd does. Each
// member fsyncs its WAL before it acknowledges an entry (UnsafeNoFsync
// false), so a committed CAS is on the disks of a quorum.
func OpenCluster(dir string, members, keys, docSize, conns int) (*DB, error) {
	if members <= 0 || keys <= 0 || docSize <= 0 || conns <= 0 {
		return nil, fmt.Errorf("etcdpeer: members %d, keys %d, docSize %d and conns %d must be positive", members, keys, docSize, conns)
	}
	hosts, err := loopback.FreeAddrs(2 * members)
	if err != nil {
		return nil, err
	}
	cfgs := make([]*embed.Config, members)
	var initial []string
	for i := range cfgs {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("member-%d", i)
		cfg.Dir = filepath.Join(dir, cfg.Name)
		cfg.UnsafeNoFsync = false
		cfg.LogLevel = "fatal"
		cfg.Logger = "zap"
		peer, client := url.URL{Scheme: "http", Host: hosts[2*i]}, url.URL{Scheme: "http", Host: hosts[2*i+1]}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.InitialClusterToken = "etcdpeer-cluster"
		initial = append(initial, cfg.Name+"="+peer.String())
		cfgs[i] = cfg
	}
	// Every member must start before any can elect a leader, so they
	// start at once.
	etcds := make([]*embed.Etcd, members)
	errs := make([]error, members)
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		cfg.InitialCluster = strings.Join(initial, ",")
		wg.Go(func() { etcds[i], errs[i] = embed.StartEtcd(cfg) })
	}
	wg.Wait()
	closeAll := func() {
		for _, e := range etcds {
			if e != nil {
				e.Close()
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, fmt.Errorf("etcdpeer: start a %d-member cluster: %w", members, err)
	}
	deadline := time.After(startTimeout)
	for i, e := range etcds {
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			closeAll()
			return nil, fmt.Errorf("etcdpeer: member %d failed to start: %w", i, err)
		case <-deadline:
			closeAll()
			return nil, fmt.Errorf("etcdpeer: member %d not ready within %v", i, startTimeout)
		}
	}
	clis := make([]*clientv3.Client, 0, conns)
	for i := range conns {
		endpoint := etcds[i%members].Clients[0].Addr().String()
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: dialTimeout, Logger: zap.NewNop()})
		if err != nil {
			for _, c := range clis {
				c.Close()
			}
			closeAll()
			return nil, fmt.Errorf("etcdpeer: client of %s: %w", endpoint, err)
		}
		clis = append(clis, cli)
	}
	return populate(etcds, clis, keys, docSize)
}

// Members returns the number of members the DB runs.
func (d *DB) Members() int { return len(d.etcds) }
