package statestore

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"
)

// Every node of a cluster admits what the leader would and applies what
// any leader admitted, so their limits and schemas must agree: a follower
// with a smaller document bound would refuse, on replay after it becomes
// leader, state the old leader stored. A node therefore compares its
// agreement (every limit in force and every registered schema's
// fingerprint) with each peer it can reach before its raft node starts,
// and refuses to open on the first difference; the leader compares a
// joining node's before AddVoter. Whichever of two disagreeing nodes
// starts second is the one refused.

// verbAgree asks a peer for its agreement.
const verbAgree = "agree"

// agreeItem is one limit or schema of an agreement.
type agreeItem struct {
	Name  string `json:"name"`  // "limits.MaxKeyBytes", "schema keeppeek.media-intent.v1"
	Value string `json:"value"` // the limit's value, the schema's fingerprint
}

// agreement is this store's limits in field order, then its schemas in
// name order: a stable encoding two nodes compare item by item.
func (s *Store) agreement() []agreeItem {
	var out []agreeItem
	v := reflect.ValueOf(s.limits)
	for i := range v.NumField() {
		out = append(out, agreeItem{Name: "limits." + v.Type().Field(i).Name, Value: fmt.Sprint(v.Field(i).Interface())})
	}
	fp := s.schemas.Fingerprints()
	names := make([]string, 0, len(fp))
	for n := range fp {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, agreeItem{Name: "schema " + n, Value: fp[n]})
	}
	return out
}

// disagreement is nil when ours and theirs agree, else INVALID_ARGUMENT
// naming the first limit or schema that differs (or that one side lacks).
func disagreement(peer string, ours, theirs []agreeItem) error {
	tm := map[string]string{}
	for _, it := range theirs {
		tm[it.Name] = it.Value
	}
	om := map[string]bool{}
	for _, it := range ours {
		om[it.Name] = true
		tv, ok := tm[it.Name]
		switch {
		case !ok:
			return newErr(InvalidArgument, it.Name, "this node has %s = %s and the peer %q has none: every node's limits and schemas must agree", it.Name, it.Value, peer)
		case tv != it.Value:
			return newErr(InvalidArgument, it.Name, "this node has %s = %s and the peer %q has %s: every node's limits and schemas must agree", it.Name, it.Value, peer, tv)
		}
	}
	for _, it := range theirs {
		if !om[it.Name] {
			return newErr(InvalidArgument, it.Name, "the peer %q has %s = %s and this node has none: every node's limits and schemas must agree", peer, it.Name, it.Value)
		}
	}
	return nil
}

// askAgreement fetches the agreement of the peer serving addr.
func (c *clusterNode) askAgreement(ctx context.Context, addr string) ([]agreeItem, error) {
	body, err := json.Marshal(&fwdRequest{Verb: verbAgree})
	if err != nil {
		return nil, err
	}
	out, err := c.caller.Call(ctx, addr, body)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Agreement []agreeItem `json:"agreement"`
		Err       *fwdError   `json:"err,omitempty"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, err
	}
	if resp.Err != nil {
		return nil, fmt.Errorf("%s", resp.Err.Message)
	}
	return resp.Agreement, nil
}

// agreeWithPeers compares this node's agreement with every peer that
// answers within wait, in parallel; a peer that does not answer (not
// started yet) checks this node when it starts.
func (c *clusterNode) agreeWithPeers(wait time.Duration) error {
	ours := c.s.agreement()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	c.rpcMu.Lock()
	peers := map[string]string{}
	for id, addr := range c.rpcs {
		if id != c.self {
			peers[id] = addr
		}
	}
	c.rpcMu.Unlock()
	for id, addr := range peers {
		wg.Go(func() {
			theirs, err := c.askAgreement(ctx, addr)
			if err != nil {
				return
			}
			if err := disagreement(id, ours, theirs); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// agreeWithJoiner is the leader's check of a node about to join: it must
// answer, and agree.
func (c *clusterNode) agreeWithJoiner(id, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.wait)
	defer cancel()
	theirs, err := c.askAgreement(ctx, addr)
	if err != nil {
		return newErr(Unavailable, "peer", "the joining node %q at %s did not tell its limits and schemas: %v", id, addr, err)
	}
	return disagreement(id, c.s.agreement(), theirs)
}

// answerAgreement is the peer side of verbAgree.
func (c *clusterNode) answerAgreement() ([]byte, error) {
	return json.Marshal(struct {
		Agreement []agreeItem `json:"agreement"`
	}{c.s.agreement()})
}
