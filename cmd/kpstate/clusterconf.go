package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/rules"
	"github.com/keeppeek/statestore/replica"
)

// clusterSection is [cluster]: this node, the initial members, and the
// peers' mutual TLS.
type clusterSection struct {
	// NodeID is this node's ID, one of Peers': unique forever (a wiped
	// node rejoins under a new one).
	NodeID string `toml:"node_id"`
	// RaftListen and RPCListen are this node's raft and peer-call
	// addresses, as its own [[cluster.peer]] gives them: the peers dial
	// them, so neither may be port 0 or every interface.
	RaftListen string `toml:"raft_listen"`
	RPCListen  string `toml:"rpc_listen"`
	// Join starts a node that is not in the initial configuration: it
	// never bootstraps, and waits for the leader's add-voter.
	Join bool `toml:"join"`
	// Peers is the initial configuration, the same on every node, this
	// node included.
	Peers []peerConfig `toml:"peer"`
	// TLS is the peers' mutual TLS under one cluster CA.
	TLS clusterTLS `toml:"tls"`
	// Timeouts: 0 or absent is replica's default.
	HeartbeatTimeout   duration `toml:"heartbeat_timeout"`
	ElectionTimeout    duration `toml:"election_timeout"`
	LeaderLeaseTimeout duration `toml:"leader_lease_timeout"`
	CommitTimeout      duration `toml:"commit_timeout"`
}

// peerConfig is one [[cluster.peer]].
type peerConfig struct {
	ID       string `toml:"id"`
	RaftAddr string `toml:"raft_addr"`
	RPCAddr  string `toml:"rpc_addr"`
}

// clusterTLS is [cluster.tls]: the node's certificate and key, and the
// cluster CA that signs every node's (all three or none).
type clusterTLS struct {
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	CAFile   string `toml:"ca_file"`
}

// fieldError is a [cluster] refusal before configError gives it its file.
type fieldError struct {
	field string
	err   error
}

// check validates [cluster]; listen is the client listen address, which
// no peer port may share.
func (cs *clusterSection) check(listen string) *fieldError {
	bad := func(field, format string, args ...any) *fieldError {
		return &fieldError{field: "cluster." + field, err: fmt.Errorf(format, args...)}
	}
	switch {
	case cs.NodeID == "":
		return bad("node_id", "required: this node's ID, one of [[cluster.peer]]'s")
	case !rules.Segment(cs.NodeID):
		return bad("node_id", "%q: want letters, digits, '.', '_' and '-' only", cs.NodeID)
	}
	for _, f := range []struct{ name, addr string }{{"raft_listen", cs.RaftListen}, {"rpc_listen", cs.RPCListen}} {
		if f.addr == "" {
			return bad(f.name, "required: HOST:PORT the peers reach this node by")
		}
		if err := checkPeerAddr(f.addr); err != nil {
			return bad(f.name, "%v", err)
		}
	}
	if cs.RaftListen == cs.RPCListen {
		return bad("rpc_listen", "%q is raft_listen too: raft and the peer calls need a port each", cs.RPCListen)
	}
	for _, f := range []struct{ name, addr string }{{"raft_listen", cs.RaftListen}, {"rpc_listen", cs.RPCListen}} {
		if f.addr == listen {
			return bad(f.name, "%q is listen too", f.addr)
		}
	}
	if len(cs.Peers) == 0 {
		return bad("peer", "required: the initial members, this node included, one [[cluster.peer]] each")
	}
	ids := map[string]int{}
	addrs := map[string]string{}
	self := -1
	for i, p := range cs.Peers {
		field := func(name string) string { return fmt.Sprintf("peer[%d].%s", i, name) }
		switch {
		case p.ID == "":
			return bad(field("id"), "required")
		case !rules.Segment(p.ID):
			return bad(field("id"), "%q: want letters, digits, '.', '_' and '-' only", p.ID)
		}
		if j, dup := ids[p.ID]; dup {
			return bad(field("id"), "%q is already peer[%d]'s", p.ID, j)
		}
		ids[p.ID] = i
		for _, a := range []struct{ name, addr string }{{"raft_addr", p.RaftAddr}, {"rpc_addr", p.RPCAddr}} {
			if a.addr == "" {
				return bad(field(a.name), "required")
			}
			if err := checkPeerAddr(a.addr); err != nil {
				return bad(field(a.name), "%v", err)
			}
			if other, dup := addrs[a.addr]; dup {
				return bad(field(a.name), "%q is already %s", a.addr, other)
			}
			addrs[a.addr] = "cluster." + field(a.name)
		}
		if p.ID == cs.NodeID {
			self = i
		}
	}
	if self < 0 {
		return bad("node_id", "%q is no [[cluster.peer]]'s id: list this node among the peers", cs.NodeID)
	}
	if p := cs.Peers[self]; p.RaftAddr != cs.RaftListen {
		return bad(fmt.Sprintf("peer[%d].raft_addr", self), "%q is this node's, but raft_listen is %q", p.RaftAddr, cs.RaftListen)
	} else if p.RPCAddr != cs.RPCListen {
		return bad(fmt.Sprintf("peer[%d].rpc_addr", self), "%q is this node's, but rpc_listen is %q", p.RPCAddr, cs.RPCListen)
	}
	t := cs.TLS
	if t.CertFile != "" || t.KeyFile != "" || t.CAFile != "" {
		for _, f := range []struct{ name, file string }{{"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"ca_file", t.CAFile}} {
			if f.file == "" {
				return bad("tls."+f.name, "required: [cluster.tls] is mutual TLS and needs cert_file, key_file and ca_file")
			}
		}
	}
	for _, f := range []struct {
		name string
		d    duration
	}{{"heartbeat_timeout", cs.HeartbeatTimeout}, {"election_timeout", cs.ElectionTimeout},
		{"leader_lease_timeout", cs.LeaderLeaseTimeout}, {"commit_timeout", cs.CommitTimeout}} {
		if f.d < 0 {
			return bad(f.name, "%v is negative", time.Duration(f.d))
		}
	}
	return nil
}

// checkPeerAddr is the rule for an address a peer dials: HOST:PORT with
// a host and a port other than 0.
func checkPeerAddr(addr string) error {
	if err := checkHostPort(addr); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(addr)
	if n, _ := strconv.Atoi(port); n == 0 {
		return fmt.Errorf("%q: port 0 cannot be dialled by the peers", addr)
	}
	if host == "" || (net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified()) {
		return fmt.Errorf("%q: every interface is no address a peer can dial; give this node's own", addr)
	}
	return nil
}

// tlsEnabled reports whether [cluster.tls] names its files.
func (cs *clusterSection) tlsEnabled() bool { return cs.TLS.CertFile != "" }

// checkExposure refuses a raft or RPC address off loopback without
// [cluster.tls]; a nil section has none.
func (cs *clusterSection) checkExposure(file string) error {
	if cs == nil || cs.tlsEnabled() {
		return nil
	}
	addrs := []struct{ name, addr string }{{"cluster.raft_listen", cs.RaftListen}, {"cluster.rpc_listen", cs.RPCListen}}
	for i, p := range cs.Peers {
		addrs = append(addrs, struct{ name, addr string }{fmt.Sprintf("cluster.peer[%d].raft_addr", i), p.RaftAddr},
			struct{ name, addr string }{fmt.Sprintf("cluster.peer[%d].rpc_addr", i), p.RPCAddr})
	}
	for _, f := range addrs {
		if !loopback(f.addr) {
			return &configError{File: file, Field: f.name, Err: fmt.Errorf("%q is not a loopback address and [cluster.tls] names no certificate: "+
				"raft and forwarded writes (each naming its principal) would cross the network in clear and unauthenticated. "+
				"Configure [cluster.tls] with the cluster CA, or pass --insecure if the peers' network is trusted", f.addr)}
		}
	}
	return nil
}

// loadTLS reads [cluster.tls]: nil without it; else mutual TLS, every
// peer (client and server side) proven by a certificate the cluster CA
// signed, and the CA the only one trusted.
func (cs *clusterSection) loadTLS(file string) (*tls.Config, error) {
	if !cs.tlsEnabled() {
		return nil, nil
	}
	read := func(field, name string) ([]byte, error) {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, &configError{File: file, Field: "cluster.tls." + field, Err: err}
		}
		return b, nil
	}
	certPEM, err := read("cert_file", cs.TLS.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read("key_file", cs.TLS.KeyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := read("ca_file", cs.TLS.CAFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &configError{File: file, Field: "cluster.tls", Err: fmt.Errorf("%s and %s are not a certificate and its key: %w", cs.TLS.CertFile, cs.TLS.KeyFile, err)}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, &configError{File: file, Field: "cluster.tls.ca_file", Err: errors.New("no PEM certificate in " + cs.TLS.CAFile)}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

// options is [cluster] as OpenCluster takes it, on hashicorp/raft
// (replica.Raft) over TCP, over mutual TLS with tc ([cluster.tls]). Its
// LogStore and StableStore stay nil: the store's default raft log.
func (cs *clusterSection) options(tc *tls.Config) statestore.ClusterOptions {
	co := statestore.ClusterOptions{NodeID: cs.NodeID, RaftAddr: cs.RaftListen, RPCAddr: cs.RPCListen, Join: cs.Join, Engine: &replica.Raft{TLS: tc},
		HeartbeatTimeout: time.Duration(cs.HeartbeatTimeout), ElectionTimeout: time.Duration(cs.ElectionTimeout),
		LeaderLeaseTimeout: time.Duration(cs.LeaderLeaseTimeout), CommitTimeout: time.Duration(cs.CommitTimeout)}
	for _, p := range cs.Peers {
		co.Peers = append(co.Peers, statestore.Peer{ID: p.ID, RaftAddr: p.RaftAddr, RPCAddr: p.RPCAddr})
	}
	return co
}
