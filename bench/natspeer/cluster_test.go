package natspeer

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestClusterReplicatesEveryDocument: OpenCluster's bucket has a stream
// replica on each of the three servers, every server syncs every write,
// the connections spread over the servers, and a CAS on a connection to
// any server commits.
func TestClusterReplicatesEveryDocument(t *testing.T) {
	t.Parallel()
	db, err := OpenCluster(t.TempDir(), 3, 4, 64, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Servers() != 3 {
		t.Fatalf("%d servers, want 3", db.Servers())
	}
	for i, srv := range db.srvs {
		if cfg := srv.JetStreamConfig(); cfg == nil || !cfg.SyncAlways {
			t.Fatalf("server %d: JetStream config %+v: SyncAlways is off", i, cfg)
		}
	}
	for i, nc := range db.ncs {
		if want := db.srvs[i%3].ClientURL(); nc.ConnectedUrl() != want {
			t.Fatalf("connection %d reaches %s, want %s", i, nc.ConnectedUrl(), want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := db.kvs[0].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("bucket stream: %d replicas configured, cluster %+v: want 3, a leader and 2 other replicas", info.Config.Replicas, info.Cluster)
	}
	for k := range 4 {
		before := db.Revision(k)
		if err := db.CAS(k); err != nil {
			t.Fatalf("CAS %d: %v", k, err)
		}
		if db.Revision(k) <= before {
			t.Fatalf("CAS %d: revision %d after %d", k, db.Revision(k), before)
		}
	}
}
