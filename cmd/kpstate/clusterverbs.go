package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/keeppeek/statestore/internal/cliflag"
)

// runCluster is kpstate cluster: the admin verbs of a cluster node,
// over its HTTP admin surface (clusterAPI) as an admin token's principal.
func runCluster(args []string, stdout, stderr io.Writer) int {
	subs := []cliflag.Sub{
		{Name: "status", Summary: "the node's raft state; each member's applied index, lag and last contact", Run: runClusterStatus},
		{Name: "add-voter", Summary: "add a voter: ID RAFT_ADDR RPC_ADDR (at the leader)", Run: runClusterAddVoter},
		{Name: "remove", Summary: "remove a server from the configuration: ID (at the leader)", Run: runClusterRemove},
		{Name: "transfer-leader", Summary: "hand leadership to ID, or the most caught-up follower (at the leader)", Run: runClusterTransfer},
	}
	return cliflag.Table{Program: cliflag.Program{Name: program.Name + " cluster", ExitCodes: clientProgram.ExitCodes}, Subs: subs,
		Usage: func(w io.Writer) {
			fmt.Fprintln(w, "kpstate cluster: a cluster node's membership and leadership (admin token)")
			fmt.Fprintln(w, "\nUsage: kpstate cluster <command> [flags]   (kpstate cluster help <command> for its flags)")
			fmt.Fprintln(w, "\nCommands:")
			cliflag.Table{Subs: subs}.PrintSubs(w)
			fmt.Fprintln(w, "\nExamples:\n  kpstate cluster status --token-file ops.token\n  kpstate cluster transfer-leader n2 --token-file ops.token")
			fmt.Fprintln(w, "\nExit codes: "+clientProgram.ExitCodes)
		}}.Run(args, stdout, stderr)
}

const clusterVerbAbout = ` The verb is a request to the first of --endpoints (ws:// or wss://, as its HTTP
address) that answers, tried in order, as an admin principal; a plain principal's token is refused
403 (exit 1). A change goes on to the next endpoint only when the connection could not be made, so
it is never sent twice. A membership or leadership change must reach the leader: "kpstate cluster
status" names it.`

func runClusterStatus(args []string, stdout, stderr io.Writer) int {
	_, o := newClientCommand("cluster status", cliflag.Help{Synopsis: "[--json]",
		About: `Prints the node's view of the cluster: its ID, raft state and term, the leader (and its raft
address), whether this node is ready (a leader known and caught up), how long ago it heard from the
leader, its applied, commit and last log index, the leaders it has seen and the raft snapshots it took
and installed; then each member with its suffrage and, as the leader last heard it (asked of the
leader), its applied index, its lag in entries and how long ago it heard from the leader.` + clusterVerbAbout,
		Examples: []string{"kpstate cluster status --endpoints ws://127.0.0.1:8765 --token-file ops.token",
			"kpstate cluster status --json --token-file ops.token | jq .leader"}}, stdout, stderr)
	if code := o.parse(args, 0); code >= 0 {
		return code
	}
	return o.clusterCall(http.MethodGet, "", clusterRequest{})
}

func runClusterAddVoter(args []string, stdout, stderr io.Writer) int {
	c, o := newClientCommand("cluster add-voter", cliflag.Help{Synopsis: "ID RAFT_ADDR RPC_ADDR [--json]",
		About: `Adds a voter to the cluster at the leader: a node started with join = true under [cluster] and the same
ID and addresses. The nodes that restart later should list it in their [[cluster.peer]].` + clusterVerbAbout,
		Examples: []string{"kpstate cluster add-voter n4 10.0.0.4:7001 10.0.0.4:7002 --endpoints wss://10.0.0.1:8765 --cacert ca.pem --token-file ops.token"}}, stdout, stderr)
	if code := o.parse(args, 3); code >= 0 {
		return code
	}
	a := c.FS.Args()
	return o.clusterCall(http.MethodPost, "/add-voter", clusterRequest{ID: a[0], RaftAddr: a[1], RPCAddr: a[2]})
}

func runClusterRemove(args []string, stdout, stderr io.Writer) int {
	c, o := newClientCommand("cluster remove", cliflag.Help{Synopsis: "ID [--json]",
		About: `Removes server ID from the cluster's configuration at the leader. A removed node's ID is not reused:
a wiped node rejoins under a new one.` + clusterVerbAbout,
		Examples: []string{"kpstate cluster remove n3 --token-file ops.token"}}, stdout, stderr)
	if code := o.parse(args, 1); code >= 0 {
		return code
	}
	return o.clusterCall(http.MethodPost, "/remove", clusterRequest{ID: c.FS.Arg(0)})
}

func runClusterTransfer(args []string, stdout, stderr io.Writer) int {
	c, o := newClientCommand("cluster transfer-leader", cliflag.Help{Synopsis: "[ID] [--json]",
		About: `Hands leadership from the leader to ID, or without it to the most caught-up follower, and prints the
status after.` + clusterVerbAbout,
		Examples: []string{"kpstate cluster transfer-leader n2 --token-file ops.token", "kpstate cluster transfer-leader --token-file ops.token"}}, stdout, stderr)
	if code := o.parse(args, 0, 1); code >= 0 {
		return code
	}
	return o.clusterCall(http.MethodPost, "/transfer-leader", clusterRequest{ID: c.FS.Arg(0)})
}

// clusterCall makes one admin request and prints its answer, the status:
// exit 1 when the server refused it ({"error":{...}}), 2 for a
// connection or authentication failure. It tries each of --endpoints in
// order until one answers: a node that is down must not fail the verb. A
// change (POST) moves on only when the connection could not be made, so
// it is never sent twice; a status moves on after any failure to answer.
func (o *clientOptions) clusterCall(method, path string, req clusterRequest) int {
	tok, err := o.token()
	if err != nil {
		return o.cmd.Fail(exitUsage, "%v", err)
	}
	tc, err := o.tlsConfig()
	if err != nil {
		return o.cmd.Fail(exitUsage, "%v", err)
	}
	var urls []string
	eps := o.endpointList()
	for _, ep := range eps {
		base, ok := strings.CutPrefix(ep, "ws")
		if !ok || !(strings.HasPrefix(base, "://") || strings.HasPrefix(base, "s://")) {
			return o.cmd.UsageError("--endpoints %s: want ws:// or wss://", ep)
		}
		urls = append(urls, "http"+strings.TrimSuffix(base, "/ws")+clusterAPI+path)
	}
	var body []byte
	if method == http.MethodPost {
		body, _ = json.Marshal(req)
	}
	hc := &http.Client{Timeout: o.timeout, Transport: &http.Transport{TLSClientConfig: tc}}
	defer hc.CloseIdleConnections()
	var failed []string
	for i, u := range urls {
		ep := eps[i]
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		hr, err := http.NewRequest(method, u, rd)
		if err != nil {
			return o.cmd.Fail(exitUsage, "%v", err)
		}
		hr.Header.Set("Authorization", "Bearer "+tok)
		if body != nil {
			hr.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(hr)
		if err != nil {
			failed = append(failed, err.Error())
			var oe *net.OpError
			if method == http.MethodPost && !(errors.As(err, &oe) && oe.Op == "dial") {
				// The change may have reached this node: not sent again.
				return o.cmd.Fail(exitUsage, "%s did not answer, and the change may have reached it: %v", ep, err)
			}
			continue
		}
		return o.clusterAnswer(ep, resp)
	}
	return o.cmd.Fail(exitUsage, "no endpoint answered: %s", strings.Join(failed, "; "))
}

// clusterAnswer prints one endpoint's answer.
func (o *clientOptions) clusterAnswer(ep string, resp *http.Response) int {
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return o.cmd.Fail(exitUsage, "reading the answer of %s: %v", ep, err)
	}
	if resp.StatusCode != http.StatusOK {
		var ae adminError
		if json.Unmarshal(raw, &ae) != nil || ae.Error.Code == "" {
			return o.cmd.Fail(exitUsage, "%s answered %s: %s", ep, resp.Status, strings.TrimSpace(string(raw)))
		}
		if resp.StatusCode == http.StatusUnauthorized {
			// A token the server does not know: the check of a token, as a
			// refused handshake is for the other verbs.
			return o.cmd.Fail(exitUsage, "%s refused the token: %s", ep, ae.Error.Message)
		}
		return o.refuse(ae.Error, "")
	}
	var st clusterStatusJSON
	if err := json.Unmarshal(raw, &st); err != nil {
		return o.cmd.Fail(exitUsage, "the answer of %s is not a cluster status: %v", ep, err)
	}
	if o.json {
		return o.printJSON(st)
	}
	return o.printf("%s", formatClusterStatus(st))
}

// formatClusterStatus is the status for people: this node's raft state,
// then each member with its progress as the leader last heard it ("-"
// where the leader could not tell).
func formatClusterStatus(st clusterStatusJSON) string {
	var b strings.Builder
	leader := "none known"
	if st.Leader != "" {
		leader = st.Leader + " (" + st.LeaderAddr + ")"
	}
	ready := "yes"
	if !st.Ready {
		ready = "no"
	}
	contact := "never"
	if st.State == "leader" {
		contact = "this node leads"
	} else if st.LastContactMs >= 0 {
		contact = (time.Duration(st.LastContactMs) * time.Millisecond).String() + " ago"
	}
	progress := "as the leader " + st.ProgressFrom + " last heard them"
	if st.ProgressFrom == "" {
		progress = "progress unknown: " + st.ProgressError
	}
	fmt.Fprintf(&b, "node:          %s\nstate:         %s, term %d\nleader:        %s\nready:         %s\nlast contact:  %s\n"+
		"applied index: %d\ncommit index:  %d\nlast log:      %d\nleaders seen:  %d\nsnapshots:     %d taken, %d installed\nmembers:       %d (%s)\n",
		st.Node, st.State, st.Term, leader, ready, contact, st.AppliedIndex, st.CommitIndex, st.LastLogIndex, st.LeaderChanges,
		st.SnapshotsTaken, st.SnapshotsInstalled, len(st.Members), progress)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tRAFT ADDRESS\tSUFFRAGE\tROLE\tAPPLIED\tLAG\tLAST CONTACT")
	for _, m := range st.Members {
		role := "follower"
		if m.Leader {
			role = "leader"
		}
		applied, lag, last := "-", "-", "-"
		if m.AppliedIndex != nil {
			applied = strconv.FormatUint(*m.AppliedIndex, 10)
		}
		if m.Lag != nil {
			lag = strconv.FormatUint(*m.Lag, 10)
		}
		if m.LastContactMs != nil {
			last = (time.Duration(*m.LastContactMs) * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.RaftAddr, m.Suffrage, role, applied, lag, last)
	}
	tw.Flush()
	return b.String()
}
