package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
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
// --json.
type clusterStatusJSON struct {
	Node         string         `json:"node"`
	Leader       string         `json:"leader"`      // "" when none is known
	LeaderAddr   string         `json:"leader_addr"` // its raft address
	IsLeader     bool           `json:"is_leader"`
	Ready        bool           `json:"ready"` // /readyz's answer
	AppliedIndex uint64         `json:"applied_index"`
	Members      []memberStatus `json:"members"`
}

// memberStatus is one member of the configuration.
type memberStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	Suffrage string `json:"suffrage"` // "voter" or "nonvoter"
	Leader   bool   `json:"leader"`
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
	mux.HandleFunc("GET "+clusterAPI, s.admin(func(cl *statestore.Cluster, _ clusterRequest) (any, error) { return s.clusterStatus(cl) }))
	mux.HandleFunc("POST "+clusterAPI+"/add-voter", s.admin(func(cl *statestore.Cluster, r clusterRequest) (any, error) {
		return nil, cl.AddVoter(statestore.Peer{ID: r.ID, RaftAddr: r.RaftAddr, RPCAddr: r.RPCAddr})
	}))
	mux.HandleFunc("POST "+clusterAPI+"/remove", s.admin(func(cl *statestore.Cluster, r clusterRequest) (any, error) {
		if r.ID == "" {
			return nil, &statestore.Error{Code: statestore.InvalidArgument, Field: "id", Message: "the ID of the server to remove is required"}
		}
		return nil, cl.RemoveServer(r.ID)
	}))
	mux.HandleFunc("POST "+clusterAPI+"/transfer-leader", s.admin(func(cl *statestore.Cluster, r clusterRequest) (any, error) {
		return nil, cl.TransferLeadership(r.ID)
	}))
}

// admin wraps a cluster verb: the token's principal must be an admin,
// the store a cluster node; the answer is the verb's JSON (the status
// after a change), or {"error":{...}} with the HTTP status of its code.
func (s *server) admin(verb func(*statestore.Cluster, clusterRequest) (any, error)) http.HandlerFunc {
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
		v, err := verb(cl, req)
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
			if v, err = s.clusterStatus(cl); err != nil {
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

// clusterStatus is this node's view of the cluster.
func (s *server) clusterStatus(cl *statestore.Cluster) (clusterStatusJSON, error) {
	members, err := cl.Members()
	if err != nil {
		return clusterStatusJSON{}, err
	}
	st := clusterStatusJSON{Node: cl.NodeID(), IsLeader: cl.IsLeader(), Ready: s.clusterUnready() == "", AppliedIndex: cl.AppliedIndex(),
		Members: []memberStatus{}}
	st.Leader, st.LeaderAddr = cl.Leader()
	for _, m := range members {
		suffrage := "nonvoter"
		if m.Voter {
			suffrage = "voter"
		}
		st.Members = append(st.Members, memberStatus{ID: m.ID, RaftAddr: m.Addr, Suffrage: suffrage, Leader: m.ID == st.Leader})
	}
	return st, nil
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

// leaderWatch counts the leader changes a cluster node sees, for the
// metrics: statestore.Cluster reports the leader, not its history, so
// it is sampled every leaderPoll.
type leaderWatch struct {
	changes atomic.Uint64
	stop    chan struct{}
	done    sync.WaitGroup
}

// leaderPoll is how often leaderWatch samples the leader: well under the
// default 300 ms election timeout, so a change is rarely missed.
const leaderPoll = 50 * time.Millisecond

func watchLeader(cl *statestore.Cluster) *leaderWatch {
	lw := &leaderWatch{stop: make(chan struct{})}
	lw.done.Add(1)
	go func() {
		defer lw.done.Done()
		t := time.NewTicker(leaderPoll)
		defer t.Stop()
		last, _ := cl.Leader()
		for {
			select {
			case <-lw.stop:
				return
			case <-t.C:
				if id, _ := cl.Leader(); id != last {
					if id != "" {
						lw.changes.Add(1)
					}
					last = id
				}
			}
		}
	}()
	return lw
}

func (lw *leaderWatch) close() {
	if lw != nil {
		close(lw.stop)
		lw.done.Wait()
	}
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
	descApplied       = prometheus.NewDesc("statestore_cluster_applied_index", "The raft index of the last entry this node's state machine applied.", nil, nil)
	descMembers       = prometheus.NewDesc("statestore_cluster_members", "The members of the raft configuration, by suffrage.", []string{"suffrage"}, nil)
	descLeaderChanges = prometheus.NewDesc("statestore_cluster_leader_changes_total", "Leaders this node has seen take over since it started (sampled every 50 ms).", nil, nil)
)

// Describe sends the cluster metrics' descriptions.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descHasLeader, descReady, descApplied, descMembers, descLeaderChanges} {
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
	id, _ := c.cl.Leader()
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, b(c.cl.IsLeader()))
	ch <- prometheus.MustNewConstMetric(descHasLeader, prometheus.GaugeValue, b(id != ""))
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, b(c.s.clusterUnready() == ""))
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(c.cl.AppliedIndex()))
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
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(voters), "voter")
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(others), "nonvoter")
	if c.s.leaders != nil {
		ch <- prometheus.MustNewConstMetric(descLeaderChanges, prometheus.CounterValue, float64(c.s.leaders.changes.Load()))
	}
}
