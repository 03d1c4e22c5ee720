package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clusterBase is a valid configuration's top, before its [cluster].
const clusterBase = "data_dir = \"d\"\nlisten = \"127.0.0.1:8765\"\n"

// clusterGood is a valid three-node [cluster], node n1's.
const clusterGood = `
[cluster]
node_id = "n1"
raft_listen = "127.0.0.1:7001"
rpc_listen = "127.0.0.1:7002"
[[cluster.peer]]
id = "n1"
raft_addr = "127.0.0.1:7001"
rpc_addr = "127.0.0.1:7002"
[[cluster.peer]]
id = "n2"
raft_addr = "127.0.0.1:7011"
rpc_addr = "127.0.0.1:7012"
`

// withKey is clusterGood with line in [cluster] itself.
func withKey(line string) string {
	const at = "rpc_listen = \"127.0.0.1:7002\"\n"
	return strings.Replace(clusterGood, at, at+line+"\n", 1)
}

// TestClusterConfigRefusals loads each bad [cluster]: the error names the
// field and the problem, and the good one loads.
func TestClusterConfigRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, toml string
		want       string // after "FILE: "; "" loads
	}{
		{"good", clusterGood, ""},
		{"good with TLS and timeouts", withKey("election_timeout = \"1s\"") + "[cluster.tls]\ncert_file = \"c\"\nkey_file = \"k\"\nca_file = \"ca\"\n", ""},
		{"no node_id", strings.Replace(clusterGood, `node_id = "n1"`, "", 1), "cluster.node_id: required"},
		{"bad node_id", strings.Replace(clusterGood, `node_id = "n1"`, `node_id = "n/1"`, 1), `cluster.node_id: "n/1": want letters`},
		{"node_id not a peer", strings.Replace(clusterGood, `node_id = "n1"`, `node_id = "n9"`, 1), `cluster.node_id: "n9" is no [[cluster.peer]]'s id`},
		{"no raft_listen", strings.Replace(clusterGood, `raft_listen = "127.0.0.1:7001"`, "", 1), "cluster.raft_listen: required"},
		{"raft_listen port 0", strings.Replace(clusterGood, `raft_listen = "127.0.0.1:7001"`, `raft_listen = "127.0.0.1:0"`, 1), "cluster.raft_listen: \"127.0.0.1:0\": port 0"},
		{"raft_listen every interface", strings.Replace(clusterGood, `raft_listen = "127.0.0.1:7001"`, `raft_listen = "0.0.0.0:7001"`, 1), "cluster.raft_listen: \"0.0.0.0:7001\": every interface"},
		{"no rpc_listen", strings.Replace(clusterGood, `rpc_listen = "127.0.0.1:7002"`, "", 1), "cluster.rpc_listen: required"},
		{"rpc_listen no port", strings.Replace(clusterGood, `rpc_listen = "127.0.0.1:7002"`, `rpc_listen = "127.0.0.1"`, 1), "cluster.rpc_listen: \"127.0.0.1\": want HOST:PORT"},
		{"rpc_listen is raft_listen", strings.Replace(clusterGood, `rpc_listen = "127.0.0.1:7002"`, `rpc_listen = "127.0.0.1:7001"`, 1), "cluster.rpc_listen: \"127.0.0.1:7001\" is raft_listen too"},
		{"raft_listen is listen", strings.ReplaceAll(clusterGood, `127.0.0.1:7001`, `127.0.0.1:8765`), "cluster.raft_listen: \"127.0.0.1:8765\" is listen too"},
		{"no peer", clusterGood[:strings.Index(clusterGood, "[[cluster.peer]]")], "cluster.peer: required"},
		{"peer no id", strings.Replace(clusterGood, `id = "n2"`, "", 1), "cluster.peer[1].id: required"},
		{"peer bad id", strings.Replace(clusterGood, `id = "n2"`, `id = "n 2"`, 1), `cluster.peer[1].id: "n 2": want letters`},
		{"peer duplicate id", strings.Replace(clusterGood, `id = "n2"`, `id = "n1"`, 1), `cluster.peer[1].id: "n1" is already peer[0]'s`},
		{"peer no raft_addr", strings.Replace(clusterGood, `raft_addr = "127.0.0.1:7011"`, "", 1), "cluster.peer[1].raft_addr: required"},
		{"peer bad rpc_addr", strings.Replace(clusterGood, `rpc_addr = "127.0.0.1:7012"`, `rpc_addr = "127.0.0.1:x"`, 1), "cluster.peer[1].rpc_addr: \"127.0.0.1:x\": the port is not a number"},
		{"peer duplicate addr", strings.Replace(clusterGood, `rpc_addr = "127.0.0.1:7012"`, `rpc_addr = "127.0.0.1:7011"`, 1), "cluster.peer[1].rpc_addr: \"127.0.0.1:7011\" is already cluster.peer[1].raft_addr"},
		{"self raft_addr differs", strings.Replace(clusterGood, `raft_listen = "127.0.0.1:7001"`, `raft_listen = "127.0.0.1:7003"`, 1), "cluster.peer[0].raft_addr: \"127.0.0.1:7001\" is this node's, but raft_listen is"},
		{"self rpc_addr differs", strings.Replace(clusterGood, `rpc_listen = "127.0.0.1:7002"`, `rpc_listen = "127.0.0.1:7003"`, 1), "cluster.peer[0].rpc_addr: \"127.0.0.1:7002\" is this node's, but rpc_listen is"},
		{"tls without ca", clusterGood + "[cluster.tls]\ncert_file = \"c\"\nkey_file = \"k\"\n", "cluster.tls.ca_file: required"},
		{"tls ca only", clusterGood + "[cluster.tls]\nca_file = \"ca\"\n", "cluster.tls.cert_file: required"},
		{"negative timeout", withKey("heartbeat_timeout = \"-1s\""), "cluster.heartbeat_timeout: -1s is negative"},
		{"bad timeout", withKey("commit_timeout = \"soon\""), "cluster.commit_timeout: "},
		{"unknown key", withKey("joins = true"), "cluster.joins: unknown key"},
		{"config_toml", "config_toml = \"config.toml\"\n" + clusterGood, "config_toml: settings-backed namespaces live in one server's config.toml and are refused with [cluster]"},
	}
	dir := t.TempDir()
	for i, c := range cases {
		file := filepath.Join(dir, fmt.Sprintf("c%d.toml", i))
		if err := os.WriteFile(file, []byte(clusterBase+c.toml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(file)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: loadConfig = %v; want it to load", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: loadConfig = %v; want an error with %q", c.name, err, c.want)
		}
	}
}

// TestClusterExposure: a raft or RPC address off loopback without
// [cluster.tls] stops serve before it listens, naming the field, unless
// --insecure; [cluster.tls] lifts the rule.
func TestClusterExposure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	off := strings.Replace(clusterGood, `rpc_addr = "127.0.0.1:7012"`, `rpc_addr = "192.0.2.7:7012"`, 1)
	cfg, err := loadConfigText(t, dir, "off.toml", clusterBase+off)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.checkExposure(false); err == nil || !strings.Contains(err.Error(), `cluster.peer[1].rpc_addr: "192.0.2.7:7012" is not a loopback address and [cluster.tls] names no certificate`) {
		t.Errorf("checkExposure = %v; want cluster.peer[1].rpc_addr refused", err)
	}
	if err := cfg.checkExposure(true); err != nil {
		t.Errorf("checkExposure(--insecure) = %v", err)
	}
	withTLS, err := loadConfigText(t, dir, "tls.toml", clusterBase+off+"[cluster.tls]\ncert_file = \"c\"\nkey_file = \"k\"\nca_file = \"ca\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := withTLS.checkExposure(false); err != nil {
		t.Errorf("checkExposure with [cluster.tls] = %v", err)
	}
	// serve runs as a child with a bound: if the rule broke it would
	// serve for ever, and the test must fail, not hang.
	code, errs := serveWithin(t, 10*time.Second, filepath.Join(dir, "off.toml"))
	if code != exitUsage || !strings.Contains(errs, "cluster.peer[1].rpc_addr") {
		t.Errorf("serve: exit %d, stderr %q; want 2 naming cluster.peer[1].rpc_addr", code, errs)
	}
}

// serveWithin runs kpstate serve --config file as a child process that
// must exit within bound: one still running then is killed (by its PID,
// through the context), waited for, and fails the test.
func serveWithin(t *testing.T, bound time.Duration, file string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, kpstateBin, "serve", "--config", file)
	cmd.Env = childEnv()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kpstate serve --config %s still ran after %v (killed): it should have refused to start\nstderr %s", file, bound, errb.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("kpstate serve: %v", err)
	}
	return cmd.ProcessState.ExitCode(), errb.String()
}

func loadConfigText(t *testing.T, dir, name, text string) (*config, error) {
	t.Helper()
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return loadConfig(file)
}

// freePorts returns n ports free on 127.0.0.1 a moment ago: a cluster's
// peers must know each other's ports before they start.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs
}

// testNode is one kpstate serve of a test cluster.
type testNode struct {
	id, raft, rpc string
	*proc
}

// clusterTOML is [cluster] for node self of peers.
func clusterTOML(self testNode, peers []testNode, join bool, tt *testTLS) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n[cluster]\nnode_id = %q\nraft_listen = %q\nrpc_listen = %q\njoin = %t\n", self.id, self.raft, self.rpc, join)
	for _, p := range peers {
		fmt.Fprintf(&b, "[[cluster.peer]]\nid = %q\nraft_addr = %q\nrpc_addr = %q\n", p.id, p.raft, p.rpc)
	}
	if tt != nil {
		fmt.Fprintf(&b, "[cluster.tls]\ncert_file = %q\nkey_file = %q\nca_file = %q\n", tt.certFile, tt.keyFile, tt.caFile)
	}
	return b.String()
}

// clusterStatusOf runs kpstate cluster status --json against n.
func clusterStatusOf(t *testing.T, n *testNode, tokFile, caFile string) clusterStatusJSON {
	t.Helper()
	args := []string{"cluster", "status", "--json", "--endpoints", n.start.Endpoint, "--token-file", tokFile}
	if caFile != "" {
		args = append(args, "--cacert", caFile)
	}
	code, out, errs := kp(t, args...)
	if code != exitOK {
		t.Fatalf("cluster status on %s: exit %d, stderr %s", n.id, code, errs)
	}
	var st clusterStatusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("cluster status --json %q: %v", out, err)
	}
	return st
}

// until polls cond every 50 ms for at most guard; a timeout fails the
// test with what.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, guard)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterOfThreeServes starts three kpstate serve processes as one
// cluster on loopback, without and with peer mutual TLS: the cluster
// forms and every /readyz turns 200; a put through one node is read
// through another; cluster status shows three voters and one leader;
// transfer-leader moves it; a plain principal is refused 403; and
// without TLS, remove and add-voter (a fourth node started with join)
// change the membership.
func TestClusterOfThreeServes(t *testing.T) {
	t.Parallel()
	for _, withTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "TLS"}[withTLS], func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ops, alice := newPrincipal(t, "ops", true), newPrincipal(t, "alice", false)
			opsTok := writeFile(t, dir, "ops.token", ops.token)
			aliTok := writeFile(t, dir, "alice.token", alice.token)
			var tt *testTLS
			caFile := ""
			if withTLS {
				tt = newTLS(t, dir)
				caFile = tt.caFile
			}
			ports := freePorts(t, 8)
			nodes := make([]testNode, 3)
			for i := range nodes {
				nodes[i] = testNode{id: fmt.Sprintf("n%d", i+1), raft: ports[2*i], rpc: ports[2*i+1]}
			}
			start := func(n *testNode, peers []testNode, join bool) {
				nd := filepath.Join(dir, n.id)
				if err := os.MkdirAll(nd, 0o755); err != nil {
					t.Fatal(err)
				}
				sc := serverConfig{dataDir: filepath.Join(nd, "data"), principals: []principal{ops, alice}, tls: tt, metrics: true}
				file := sc.write(t, nd)
				f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString(clusterTOML(*n, peers, join, tt))
				f.Close()
				n.proc = startServe(t, file, tt)
			}
			for i := range nodes {
				start(&nodes[i], nodes, false)
			}
			for i := range nodes {
				n := &nodes[i]
				until(t, n.id+" /readyz", func() bool { code, _ := n.get("/readyz", ""); return code == 200 })
			}
			// The first endpoint is down: the verb goes on to the next.
			dead := "ws://" + freePorts(t, 1)[0]
			code, out, errs := kp(t, argv("cluster", "status", "--json", "--endpoints", dead+","+nodes[0].start.Endpoint, "--token-file", opsTok, caArgs(caFile))...)
			var st clusterStatusJSON
			if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.Node != "n1" {
				t.Fatalf("cluster status with a dead first endpoint: exit %d, stdout %s, stderr %s", code, out, errs)
			}
			if code, _, errs := kp(t, argv("cluster", "status", "--endpoints", dead, "--token-file", opsTok, caArgs(caFile))...); code != exitUsage || !strings.Contains(errs, "no endpoint answered") {
				t.Errorf("cluster status with only a dead endpoint: exit %d, stderr %s; want 2, no endpoint answered", code, errs)
			}
			st = clusterStatusOf(t, &nodes[0], opsTok, caFile)
			leaders := 0
			for _, m := range st.Members {
				if m.Suffrage != "voter" {
					t.Errorf("member %+v: want a voter", m)
				}
				if m.Leader {
					leaders++
				}
			}
			code, human, errs := kp(t, argv("cluster", "status", "--endpoints", nodes[0].start.Endpoint, "--token-file", opsTok, caArgs(caFile))...)
			golden(t, "cluster_status", code, normalizeCluster(human, nodes), errs)
			if len(st.Members) != 3 || leaders != 1 || st.Leader == "" || !st.Ready || st.Node != "n1" {
				t.Fatalf("cluster status = %+v; want n1 ready, three voters, one leader", st)
			}

			// A put through one node, read through another.
			intent := writeFile(t, dir, "intent.json", intentDoc+"\n")
			const ns, key = "service/transcoder-a", "intents/front-door-video"
			base := func(n *testNode) []string {
				a := []string{"--endpoints", n.start.Endpoint, "--token-file", opsTok}
				if caFile != "" {
					a = append(a, "--cacert", caFile)
				}
				return a
			}
			if code, _, errs := kp(t, argv("put", ns, key, "--file", intent, "--schema", "keeppeek.media-intent.v1", "--create", base(&nodes[1]))...); code != exitOK {
				t.Fatalf("put through n2: exit %d, %s", code, errs)
			}
			code, out, errs = kp(t, argv("get", ns, key, "--json", base(&nodes[2]))...)
			if code != exitOK || !strings.Contains(out, `"revision":1`) {
				t.Fatalf("get through n3: exit %d, stdout %s, stderr %s", code, out, errs)
			}
			// Every member applied the put, as the leader hears it: asked
			// through a follower or the leader alike.
			applied := clusterStatusOf(t, &nodes[2], opsTok, caFile).AppliedIndex
			until(t, "every member's progress at the leader shows the put", func() bool {
				st := clusterStatusOf(t, &nodes[0], opsTok, caFile)
				ok := st.ProgressFrom == st.Leader && st.Leader != "" && st.Term > 0 && st.CommitIndex >= applied && st.LastContactMs >= 0 && st.LeaderChanges > 0
				for _, m := range st.Members {
					ok = ok && m.AppliedIndex != nil && *m.AppliedIndex >= applied && m.Lag != nil && *m.Lag == 0 && m.LastContactMs != nil
				}
				return ok
			})

			// A plain principal: 403, exit 1.
			code, out, errs = kp(t, argv("cluster", "status", "--endpoints", nodes[0].start.Endpoint, "--token-file", aliTok, caArgs(caFile))...)
			golden(t, "cluster_status_denied", code, out, errs)
			code, out, errs = kp(t, argv("cluster", "status", "--json", "--endpoints", nodes[0].start.Endpoint, "--token-file", aliTok, caArgs(caFile))...)
			golden(t, "cluster_status_denied_json", code, out, errs)
			code, out, errs = kp(t, argv("cluster", "status", "--endpoints", nodes[0].start.Endpoint, "--token-file", aliTok, caArgs(caFile))...)
			if code != exitRefused || !strings.Contains(errs, "PERMISSION_DENIED") || out != "" {
				t.Errorf("cluster status as alice: exit %d, stderr %q; want 1 PERMISSION_DENIED", code, errs)
			}
			if c, body := nodes[0].get(clusterAPI, alice.token); c != 403 {
				t.Errorf("GET %s as alice = %d %s; want 403", clusterAPI, c, body)
			}

			// Transfer the leadership to a follower.
			leader := nodeByID(t, nodes, st.Leader)
			target := ""
			for _, n := range nodes {
				if n.id != st.Leader {
					target = n.id
					break
				}
			}
			// A change goes on past a node that cannot be reached too.
			if code, _, errs := kp(t, argv("cluster", "transfer-leader", target, "--endpoints", dead+","+leader.start.Endpoint, "--token-file", opsTok, caArgs(caFile))...); code != exitOK {
				t.Fatalf("transfer-leader %s: exit %d, %s", target, code, errs)
			}
			until(t, "the leader moves to "+target, func() bool { return clusterStatusOf(t, &nodes[0], opsTok, caFile).Leader == target })
			if code, body := nodes[0].get(nodes[0].start.Metrics, ""); code != 200 ||
				!strings.Contains(body, "statestore_cluster_members{suffrage=\"voter\"} 3") || !strings.Contains(body, "statestore_cluster_has_leader 1") {
				t.Errorf("metrics: %d, missing the cluster gauges:\n%s", code, body)
			}
			// The raft state in the metrics: the new leader reports its
			// followers, every node the term the transfer began.
			newLeader := nodeByID(t, nodes, target)
			until(t, "the new leader's metrics list both followers", func() bool {
				_, body := newLeader.get(newLeader.start.Metrics, "")
				m := metricValues(body)
				ok := m["statestore_cluster_term"] > float64(st.Term) && m["statestore_cluster_leader_changes_total"] >= 2 &&
					m["statestore_cluster_commit_index"] >= float64(applied) && m["statestore_cluster_applied_index"] >= float64(applied)
				for _, n := range nodes {
					if n.id != target {
						_, lag := m[`statestore_cluster_follower_lag_entries{follower="`+n.id+`"}`]
						_, contact := m[`statestore_cluster_follower_last_contact_seconds{follower="`+n.id+`"}`]
						ok = ok && lag && contact
					}
				}
				_, taken := m["statestore_cluster_snapshots_taken_total"]
				_, installed := m["statestore_cluster_snapshots_installed_total"]
				return ok && taken && installed
			})
			if withTLS {
				// The peer ports are mutual TLS: a client without a
				// certificate the cluster CA signed is refused.
				conn, err := tls.Dial("tcp", nodes[0].rpc, &tls.Config{RootCAs: tt.pool})
				if err == nil {
					conn.SetDeadline(time.Now().Add(guard))
					_, err = conn.Read(make([]byte, 1))
					conn.Close()
				}
				if err == nil || !strings.Contains(err.Error(), "certificate") {
					t.Errorf("a peer call without a client certificate: %v; want the handshake refused for want of a certificate", err)
				}
				// A node that loses its quorum is no longer ready.
				for i := 1; i < len(nodes); i++ {
					nodes[i].signal(syscall.SIGKILL)
					nodes[i].wait()
				}
				until(t, "n1 /readyz 503 without a leader", func() bool {
					code, body := nodes[0].get("/readyz", "")
					return code == 503 && strings.Contains(body, "knows no leader")
				})
				return
			}

			// Membership: remove a follower, then add a fourth node.
			leader = nodeByID(t, nodes, target)
			var follower string
			for _, n := range nodes {
				if n.id != target {
					follower = n.id
					break
				}
			}
			if code, out, errs := kp(t, argv("cluster", "remove", follower, base(leader))...); code != exitOK || !strings.Contains(out, "members:       2") {
				t.Fatalf("cluster remove %s: exit %d, stdout %s, stderr %s", follower, code, out, errs)
			}
			n4 := testNode{id: "n4", raft: ports[6], rpc: ports[7]}
			start(&n4, append(append([]testNode(nil), nodes...), n4), true)
			code, out, errs = kp(t, argv("cluster", "add-voter", "n4", n4.raft, n4.rpc, "--json", base(leader))...)
			var after clusterStatusJSON
			if code != exitOK || json.Unmarshal([]byte(out), &after) != nil || len(after.Members) != 3 {
				t.Fatalf("cluster add-voter n4: exit %d, stdout %s, stderr %s", code, out, errs)
			}
			until(t, "n4 /readyz", func() bool { code, _ := n4.get("/readyz", ""); return code == 200 })
			code, out, errs = kp(t, argv("get", ns, key, "--json", base(&n4))...)
			if code != exitOK || !strings.Contains(out, `"revision":1`) {
				t.Fatalf("get through n4: exit %d, stdout %s, stderr %s", code, out, errs)
			}
		})
	}
}

// metricValues is a Prometheus text exposition as name{labels} -> value.
func metricValues(body string) map[string]float64 {
	m := map[string]float64{}
	for line := range strings.SplitSeq(body, "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			m[name] = f
		}
	}
	return m
}

func caArgs(caFile string) []string {
	if caFile == "" {
		return nil
	}
	return []string{"--cacert", caFile}
}

func nodeByID(t *testing.T, nodes []testNode, id string) *testNode {
	t.Helper()
	for i := range nodes {
		if nodes[i].id == id {
			return &nodes[i]
		}
	}
	t.Fatalf("no node %q", id)
	return nil
}

// normalizeCluster replaces what changes from run to run in cluster
// status's human form: each node's raft address (and so the table's
// widths), the term, the indexes, the contact and counts, which node
// leads, and the members' progress.
func normalizeCluster(s string, nodes []testNode) string {
	for _, n := range nodes {
		s = strings.ReplaceAll(s, n.raft, "<RAFT_"+n.id+">")
	}
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		key, _, _ := strings.Cut(line, ":")
		switch {
		case key == "leader":
			line = "leader:        <LEADER>"
		case key == "state":
			line = "state:         <STATE>, term <TERM>"
		case key == "last contact":
			line = "last contact:  <CONTACT>"
		case key == "applied index" || key == "commit index" || key == "last log":
			line = line[:15] + "<INDEX>"
		case key == "leaders seen":
			line = "leaders seen:  <N>"
		case key == "snapshots":
			line = "snapshots:     <N> taken, <N> installed"
		case key == "members":
			n, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "members:")), " ")
			line = "members:       " + n + " (<PROGRESS>)"
		case strings.HasPrefix(line, "  "): // a member's row: its widths follow the addresses
			f := strings.Fields(line)
			if f[0] != "ID" && len(f) == 7 {
				f = append(f[:3], "<ROLE> <APPLIED> <LAG> <CONTACT>")
			}
			line = "  " + strings.Join(f, " ")
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// TestFormatClusterStatus: the human status shows each member's progress
// as the leader gave it, "-" where it could not, and says why; a node
// that never heard from a leader says so.
func TestFormatClusterStatus(t *testing.T) {
	t.Parallel()
	u := func(v uint64) *uint64 { return &v }
	i := func(v int64) *int64 { return &v }
	cases := []struct {
		name string
		st   clusterStatusJSON
		want []string
	}{
		{"leader with progress", clusterStatusJSON{Node: "n1", Leader: "n1", LeaderAddr: "r1", State: "leader", Term: 4, AppliedIndex: 9, CommitIndex: 9,
			LastLogIndex: 9, LeaderChanges: 2, SnapshotsTaken: 1, ProgressFrom: "n1", Members: []memberStatus{
				{ID: "n1", RaftAddr: "r1", Suffrage: "voter", Leader: true, AppliedIndex: u(9), Lag: u(0), LastContactMs: i(0)},
				{ID: "n2", RaftAddr: "r2", Suffrage: "voter", AppliedIndex: u(4), Lag: u(5), LastContactMs: i(1500)},
				{ID: "n3", RaftAddr: "r3", Suffrage: "nonvoter", AppliedIndex: u(9), Lag: u(0)}}},
			[]string{"state:         leader, term 4\n", "last contact:  this node leads\n", "leaders seen:  2\n", "snapshots:     1 taken, 0 installed\n",
				"members:       3 (as the leader n1 last heard them)\n", "  n2  r2            voter     follower  4        5    1.5s\n",
				"  n3  r3            nonvoter  follower  9        0    -\n"}},
		{"follower without a leader", clusterStatusJSON{Node: "n2", State: "candidate", Term: 7, LastContactMs: -1,
			ProgressError: "no leader is known", Members: []memberStatus{{ID: "n1", RaftAddr: "r1", Suffrage: "voter"}}},
			[]string{"leader:        none known\n", "ready:         no\n", "last contact:  never\n",
				"members:       1 (progress unknown: no leader is known)\n", "  n1  r1            voter     follower  -        -    -\n"}},
		{"follower", clusterStatusJSON{Node: "n2", Leader: "n1", LeaderAddr: "r1", Ready: true, State: "follower", LastContactMs: 12, ProgressFrom: "n1"},
			[]string{"leader:        n1 (r1)\n", "ready:         yes\n", "last contact:  12ms ago\n"}},
	}
	for _, c := range cases {
		got := formatClusterStatus(c.st)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, got)
			}
		}
	}
}
