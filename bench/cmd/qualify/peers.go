package main

import (
	"fmt"

	"github.com/keeppeek/statestore/bench/boltpeer"
	"github.com/keeppeek/statestore/bench/etcdpeer"
	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/sqlitepeer"
)

// casPeer is another store running the durable_cas workload: casKeys
// documents of harness.DocBytes bytes, CAS(k) replacing document k when its
// revision is the one the peer last wrote.
type casPeer interface {
	CAS(key int) error
	Close() error
}

// openPeer creates a fresh peer in dir.
type openPeer func(dir string) (casPeer, error)

func openSQLite(dir string) (casPeer, error) {
	return sqlitepeer.Open(dir, casKeys, harness.DocBytes, 1)
}

func openBolt(batch bool) openPeer {
	return func(dir string) (casPeer, error) { return boltpeer.Open(dir, casKeys, harness.DocBytes, batch) }
}

func openEtcd(dir string) (casPeer, error) { return etcdpeer.Open(dir, casKeys, harness.DocBytes) }

// serialPeer is a peer's serial workload: env.Ops compare-and-sets cycling
// over casKeys documents, as durable_cas does.
func serialPeer(name string, open openPeer, note string) func(env *Env) ([]harness.Result, error) {
	return func(env *Env) ([]harness.Result, error) {
		dir, err := env.Scratch(name)
		if err != nil {
			return nil, err
		}
		db, err := open(dir)
		if err != nil {
			return nil, err
		}
		r, err := env.Run.Serial(name, env.Ops, func(i int) error { return db.CAS(i % casKeys) })
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		r.Writers = 1
		r.Note = fmt.Sprintf("n=%d keys=%d doc=%dB %s", env.Ops, casKeys, harness.DocBytes, note)
		return []harness.Result{r}, nil
	}
}

// concurrentPeer is a peer's concurrent workload: per writer count W, on a
// fresh peer, writer w cycles over the keys k with k%W == w, as
// durable_cas_concurrent does.
func concurrentPeer(name string, open openPeer, note string) func(env *Env) ([]harness.Result, error) {
	return concurrentPeerFor(name, func(int) openPeer { return open }, note)
}

// concurrentPeerFor is concurrentPeer for a peer opened for its writer
// count (one network connection per writer, say).
func concurrentPeerFor(name string, openFor func(writers int) openPeer, note string) func(env *Env) ([]harness.Result, error) {
	return func(env *Env) ([]harness.Result, error) {
		var out []harness.Result
		for _, w := range env.Writers {
			if w > casKeys {
				return out, fmt.Errorf("%d writers exceed %d keys", w, casKeys)
			}
			dir, err := env.Scratch(name)
			if err != nil {
				return out, err
			}
			db, err := openFor(w)(dir)
			if err != nil {
				return out, err
			}
			writers := w
			r, err := env.Run.RunBudget(name, writers, env.Budget, func(wr, i int) error {
				owned := (casKeys - wr + writers - 1) / writers
				return db.CAS(wr + (i%owned)*writers)
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return out, err
			}
			r.Note += fmt.Sprintf(" keys=%d doc=%dB %s", casKeys, harness.DocBytes, note)
			env.Logf("%s writers=%d: %.0f ops/s", r.Name, w, r.OpsPerS)
			out = append(out, r)
		}
		return out, nil
	}
}
