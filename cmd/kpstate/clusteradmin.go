package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/ops/promstats"
)

// The admin HTTP surface of cluster mode, under clusterAPI: GET for the
// status, POST for the membership and leadership changes. Every request
// authenticates as the WebSocket does (a bearer token) and needs an
// admin principal.
const clusterAPI = "/api/cluster"

// clusterStatusJSON is GET /api/cluster, and kpstate cluster status
// --json: this node's raft state (statestore.ClusterStats), and each
// member with its progress as the leader last heard it.
type clusterStatusJSON struct {
	Node         string `json:"node"`
	Leader       string `json:"leader"`      // "" when none is known
	LeaderAddr   string `json:"leader_addr"` // its raft address
	IsLeader     bool   `json:"is_leader"`
	Ready        bool   `json:"ready"` // /readyz's answer
	State        string `json:"state"` // follower, candidate, leader or shutdown
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastLogIndex uint64 `json:"last_log_index"`
	// LastContactMs is how long ago this node heard from a leader: 0 on
	// the leader, -1 if never.
	LastContactMs      int64  `json:"last_contact_ms"`
	LeaderChanges      uint64 `json:"leader_changes"`
	SnapshotsTaken     uint64 `json:"snapshots_taken"`
	SnapshotsInstalled uint64 `json:"snapshots_installed"`
	// ProgressFrom is the leader whose view the members' progress is; ""
	// with ProgressError saying why when the leader could not tell.
	ProgressFrom  string         `json:"progress_from"`
	ProgressError string         `json:"progress_error,omitempty"`
	Members       []memberStatus `json:"members"`
}

// memberStatus is one member of the configuration. The progress fields
// are the leader's view (statestore.FollowerStats; the leader's own row
// has its applied index, lag 0 and contact 0), absent when no leader
// could tell or the leader has not heard from the member since it took
// over.
type memberStatus struct {
	ID            string  `json:"id"`
	RaftAddr      string  `json:"raft_addr"`
	Suffrage      string  `json:"suffrage"` // "voter" or "nonvoter"
	Leader        bool    `json:"leader"`
	AppliedIndex  *uint64 `json:"applied_index,omitempty"`
	Lag           *uint64 `json:"lag,omitempty"`             // entries its log lacks beside the leader's
	LastContactMs *int64  `json:"last_contact_ms,omitempty"` // since it last heard from a leader, as far as the leader knows
}

// clusterRequest is the body of the POST verbs.
type clusterRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr,omitempty"`
	RPCAddr  string `json:"rpc_addr,omitempty"`
}

// adminError is the body of a refused admin request, as --json prints it.
type adminError struct {
	Error refusal `json:"error"`
}

// mountClusterAdmin serves the admin surface on mux. A single store has
// none: its routes answer 404 naming why.
func (s *server) mountClusterAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET "+clusterAPI, s.admin(func(ctx context.Context, cl *statestore.Cluster, _ clusterRequest) (any, error) {
		return s.clusterStatus(ctx, cl)
	}))
	mux.HandleFunc("POST "+clusterAPI+"/add-voter", s.admin(func(_ context.Context, cl *statestore.Cluster, r clusterRequest) (any, error) {
		return nil, cl.AddVoter(statestore.Peer{ID: r.ID, RaftAddr: r.RaftAddr, RPCAddr: r.RPCAddr})
	}))
	mux.HandleFunc("POST "+clusterAPI+"/remove", s.admin(func(_ context.Context, cl *statestore.Cluster, r clusterRequest) (any, error) {
		if r.ID == "" {
			return nil, &statestore.Error{Code: statestore.InvalidArgument, Field: "id", Message: "the ID of the server to remove is required"}
		}
		return nil, cl.RemoveServer(r.ID)
	}))
	mux.HandleFunc("POST "+clusterAPI+"/transfer-leader", s.admin(func(_ context.Context, cl *statestore.Cluster, r clusterRequest) (any, error) {
		return nil, cl.TransferLeadership(r.ID)
	}))
}

// admin wraps a cluster verb: the token's principal must be an admin,
// the store a cluster node; the answer is the verb's JSON (the status
// after a change), or {"error":{...}} with the HTTP status of its code.
func (s *server) admin(verb func(context.Context, *statestore.Cluster, clusterRequest) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		p, err := s.table.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="keeppeek-statestore"`)
			writeAdmin(w, http.StatusUnauthorized, adminError{refusal{Code: "UNAUTHENTICATED", Message: err.Error()}})
			return
		}
		if !p.Admin {
			writeAdmin(w, http.StatusForbidden, adminError{refusal{Code: statestore.PermissionDenied.String(), Field: "principal",
				Message: fmt.Sprintf("principal %q is not an admin: the cluster verbs need an admin principal", p.ID)}})
			return
		}
		if s.store == nil {
			writeAdmin(w, http.StatusServiceUnavailable, adminError{refusal{Code: statestore.Unavailable.String(), Message: s.cause.Error()}})
			return
		}
		cl := s.store.Cluster()
		if cl == nil {
			writeAdmin(w, http.StatusNotFound, adminError{refusal{Code: statestore.NotFound.String(), Field: "cluster",
				Message: "this server is a single store: its configuration has no [cluster]"}})
			return
		}
		var req clusterRequest
		if r.Method == http.MethodPost {
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				writeAdmin(w, http.StatusBadRequest, adminError{refusal{Code: statestore.InvalidArgument.String(), Field: "body", Message: err.Error()}})
				return
			}
		}
		v, err := verb(r.Context(), cl, req)
		if err != nil {
			var se *statestore.Error
			if !errors.As(err, &se) {
				se = &statestore.Error{Code: statestore.Unavailable, Message: err.Error()}
			}
			s.log.Warn("cluster admin request refused", "principal", p.ID, "path", r.URL.Path, "err", err)
			writeAdmin(w, httpStatus(se.Code), adminError{refusalOf(se)})
			return
		}
		if r.Method == http.MethodPost {
			s.log.Info("cluster admin request", "principal", p.ID, "path", r.URL.Path, "id", req.ID)
			if v, err = s.clusterStatus(r.Context(), cl); err != nil {
				writeAdmin(w, http.StatusServiceUnavailable, adminError{refusal{Code: statestore.Unavailable.String(), Message: err.Error()}})
				return
			}
		}
		writeAdmin(w, http.StatusOK, v)
	}
}

// httpStatus is the HTTP status of a store error code.
func httpStatus(c statestore.Code) int {
	switch c {
	case statestore.InvalidArgument:
		return http.StatusBadRequest
	case statestore.PermissionDenied:
		return http.StatusForbidden
	case statestore.NotFound:
		return http.StatusNotFound
	default:
		return http.StatusServiceUnavailable
	}
}

func writeAdmin(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// leaderStatsWait bounds the call in which a follower asks the leader for
// its followers' progress while it answers a status.
const leaderStatsWait = 2 * time.Second

// clusterStatus is this node's view of the cluster, with the members'
// progress asked of the leader.
func (s *server) clusterStatus(ctx context.Context, cl *statestore.Cluster) (clusterStatusJSON, error) {
	members, err := cl.Members()
	if err != nil {
		return clusterStatusJSON{}, err
	}
	own := cl.Stats()
	st := clusterStatusJSON{Node: cl.NodeID(), IsLeader: cl.IsLeader(), Ready: s.clusterUnready() == "",
		State: own.State, Term: own.Term, CommitIndex: own.CommitIndex, AppliedIndex: own.AppliedIndex, LastLogIndex: own.LastLogIndex,
		LastContactMs: millis(own.LastContact), LeaderChanges: own.LeaderChanges, SnapshotsTaken: own.SnapshotsTaken,
		SnapshotsInstalled: own.SnapshotsInstalled, Members: []memberStatus{}}
	st.Leader, st.LeaderAddr = cl.Leader()
	ctx, cancel := context.WithTimeout(ctx, leaderStatsWait)
	defer cancel()
	ls, err := cl.LeaderStats(ctx)
	if err != nil {
		st.ProgressError = err.Error()
	} else {
		st.ProgressFrom = ls.NodeID
	}
	for _, m := range members {
		suffrage := "nonvoter"
		if m.Voter {
			suffrage = "voter"
		}
		ms := memberStatus{ID: m.ID, RaftAddr: m.Addr, Suffrage: suffrage, Leader: m.ID == st.Leader}
		switch {
		case err != nil:
		case m.ID == ls.NodeID:
			applied, lag, contact := ls.AppliedIndex, uint64(0), int64(0)
			ms.AppliedIndex, ms.Lag, ms.LastContactMs = &applied, &lag, &contact
		default:
			for _, f := range ls.Followers {
				if f.ID == m.ID && f.Answered {
					applied, lag := f.AppliedIndex, f.Lag
					ms.AppliedIndex, ms.Lag = &applied, &lag
					if f.LastContact >= 0 {
						contact := millis(f.LastContact)
						ms.LastContactMs = &contact
					}
				}
			}
		}
		st.Members = append(st.Members, ms)
	}
	return st, nil
}

// millis is d in whole milliseconds, -1 for a negative d (never).
func millis(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

// clusterUnready says why a cluster node is not ready ("" when it is, or
// when the store is a single one): no leader known now, or this node not
// yet caught up with the leader's read index.
func (s *server) clusterUnready() string {
	if s.store == nil {
		return ""
	}
	cl := s.store.Cluster()
	if cl == nil {
		return ""
	}
	select {
	case <-cl.Ready():
	default:
		return fmt.Sprintf("cluster node %s has not caught up with a leader yet", cl.NodeID())
	}
	if id, _ := cl.Leader(); id == "" {
		return fmt.Sprintf("cluster node %s knows no leader", cl.NodeID())
	}
	return ""
}

// metricsHandler is the store's metrics, and in cluster mode the raft
// state statestore.Cluster exposes.
func (s *server) metricsHandler(src promstats.Source) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(promstats.New(src))
	if s.store != nil && s.store.Cluster() != nil {
		reg.MustRegister(&clusterCollector{s: s, cl: s.store.Cluster()})
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// clusterCollector exports a node's raft state as
// statestore_cluster_*.
type clusterCollector struct {
	s  *server
	cl *statestore.Cluster
}

var (
	descLeader        = prometheus.NewDesc("statestore_cluster_is_leader", "1 while this node leads and admits writes.", nil, nil)
	descHasLeader     = prometheus.NewDesc("statestore_cluster_has_leader", "1 while this node knows a leader.", nil, nil)
	descReady         = prometheus.NewDesc("statestore_cluster_ready", "1 while /readyz answers ready: a leader known and this node caught up.", nil, nil)
	descTerm          = prometheus.NewDesc("statestore_cluster_term", "The raft term this node is in.", nil, nil)
	descCommit        = prometheus.NewDesc("statestore_cluster_commit_index", "The highest raft index this node knows committed.", nil, nil)
	descApplied       = prometheus.NewDesc("statestore_cluster_applied_index", "The raft index of the last entry this node's state machine applied.", nil, nil)
	descLastLog       = prometheus.NewDesc("statestore_cluster_last_log_index", "The last raft index this node's log holds, committed or not.", nil, nil)
	descLastContact   = prometheus.NewDesc("statestore_cluster_last_contact_seconds", "How long ago this node last heard from a leader: 0 on the leader; absent while it never has.", nil, nil)
	descMembers       = prometheus.NewDesc("statestore_cluster_members", "The members of the raft configuration, by suffrage.", []string{"suffrage"}, nil)
	descLeaderChanges = prometheus.NewDesc("statestore_cluster_leader_changes_total", "Leaders this node has learned of since it started, after knowing none or another.", nil, nil)
	descTaken         = prometheus.NewDesc("statestore_cluster_snapshots_taken_total", "Raft snapshots this node wrote of its own state since it started.", nil, nil)
	descInstalled     = prometheus.NewDesc("statestore_cluster_snapshots_installed_total", "Raft snapshots a leader sent this node to replace its state with, since it started.", nil, nil)
	descFollowerLag   = prometheus.NewDesc("statestore_cluster_follower_lag_entries",
		"On the leader: the entries the follower's log lacks (the leader's last log index less the follower's at its last answer).", []string{"follower"}, nil)
	descFollowerContact = prometheus.NewDesc("statestore_cluster_follower_last_contact_seconds",
		"On the leader: how long ago the follower last heard from a leader, as far as the leader knows; absent until it has answered.", []string{"follower"}, nil)
)

var clusterDescs = []*prometheus.Desc{descLeader, descHasLeader, descReady, descTerm, descCommit, descApplied, descLastLog, descLastContact,
	descMembers, descLeaderChanges, descTaken, descInstalled, descFollowerLag, descFollowerContact}

// Describe sends the cluster metrics' descriptions.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range clusterDescs {
		ch <- d
	}
}

// Collect reads the node's state at the scrape.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	st := c.cl.Stats()
	gauge(descLeader, b(c.cl.IsLeader()))
	gauge(descHasLeader, b(st.Leader != ""))
	gauge(descReady, b(c.s.clusterUnready() == ""))
	gauge(descTerm, float64(st.Term))
	gauge(descCommit, float64(st.CommitIndex))
	gauge(descApplied, float64(st.AppliedIndex))
	gauge(descLastLog, float64(st.LastLogIndex))
	if st.LastContact >= 0 {
		gauge(descLastContact, st.LastContact.Seconds())
	}
	voters, others := 0, 0
	if ms, err := c.cl.Members(); err == nil {
		for _, m := range ms {
			if m.Voter {
				voters++
			} else {
				others++
			}
		}
	}
	gauge(descMembers, float64(voters), "voter")
	gauge(descMembers, float64(others), "nonvoter")
	counter(descLeaderChanges, st.LeaderChanges)
	counter(descTaken, st.SnapshotsTaken)
	counter(descInstalled, st.SnapshotsInstalled)
	for _, f := range st.Followers {
		gauge(descFollowerLag, float64(f.Lag), f.ID)
		if f.LastContact >= 0 {
			gauge(descFollowerContact, f.LastContact.Seconds(), f.ID)
		}
	}
}
