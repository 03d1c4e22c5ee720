// Package boltpeer is a bbolt (go.etcd.io/bbolt) peer for the statestore
// qualification benchmarks: the same compare-and-set workload as the
// store's durable_cas, against one bbolt file with its default durability
// (every commit fdatasyncs the file before returning).
//
// A document is stored under its key as an 8-byte little-endian revision
// followed by the body. One CAS reads the revision, compares it with the
// expected one and writes revision+1 with the body, inside one read-write
// transaction. Serial callers use DB.Update (one transaction per CAS: bbolt's
// Batch would hold a lone caller for MaxBatchDelay); concurrent callers use
// DB.Batch, which coalesces concurrent CASes into one transaction and one
// sync, bbolt's own group commit.
//
// # Invariants
//
//  1. A CAS returns nil only after the transaction holding it committed,
//     and only when the stored revision was the expected one.
//     Code: DB.CAS.
//     Tests: TestCAS.
package boltpeer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Workload names, as they appear in results and in qualify's --only flag.
const (
	NameCAS           = "bbolt_cas"
	NameCASConcurrent = "bbolt_cas_concurrent"
)

// ErrConflict is returned by CAS when the stored revision was not the one
// expected, which the benchmark never provokes.
var ErrConflict = errors.New("boltpeer: compare-and-set conflict")

var bucket = []byte("docs")

// DB is a benchmark database of keys documents of docSize bytes, all
// created at revision 0. It tracks each key's expected revision; a key must
// be used by one goroutine at a time.
type DB struct {
	db    *bolt.DB
	revs  []uint64
	body  []byte
	batch bool
}

// Open creates a fresh database file in dir holding keys documents of
// docSize bytes. batch selects DB.Batch for every CAS (concurrent runs)
// instead of DB.Update.
func Open(dir string, keys, docSize int, batch bool) (*DB, error) {
	if keys <= 0 || docSize <= 0 {
		return nil, fmt.Errorf("boltpeer: keys %d and docSize %d must be positive", keys, docSize)
	}
	db, err := bolt.Open(filepath.Join(dir, "peer.bolt"), 0o644, nil)
	if err != nil {
		return nil, fmt.Errorf("boltpeer: open: %w", err)
	}
	if db.NoSync {
		db.Close()
		return nil, fmt.Errorf("boltpeer: bbolt opened without sync")
	}
	d := &DB{db: db, revs: make([]uint64, keys), body: make([]byte, docSize), batch: batch}
	for i := range d.body {
		d.body[i] = byte('a' + i%26)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucket)
		if err != nil {
			return err
		}
		for k := 0; k < keys; k++ {
			if err := b.Put(keyOf(k), d.value(0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("boltpeer: create %d documents: %w", keys, err)
	}
	return d, nil
}

func keyOf(k int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(k)) }

func (d *DB) value(rev uint64) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, rev), d.body...)
}

// Keys returns the number of documents.
func (d *DB) Keys() int { return len(d.revs) }

// CAS replaces document key, expecting its current revision, and advances
// the revision. It returns once bbolt committed (and synced) the change.
func (d *DB) CAS(key int) error {
	want := d.revs[key]
	val := d.value(want + 1)
	k := keyOf(key)
	fn := func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		cur := b.Get(k)
		if len(cur) < 8 || binary.LittleEndian.Uint64(cur) != want {
			return fmt.Errorf("%w: key %d rev %d", ErrConflict, key, want)
		}
		return b.Put(k, val)
	}
	var err error
	if d.batch {
		err = d.db.Batch(fn)
	} else {
		err = d.db.Update(fn)
	}
	if err != nil {
		return err
	}
	d.revs[key]++
	return nil
}

// Revision reads key's stored revision.
func (d *DB) Revision(key int) (uint64, error) {
	var rev uint64
	err := d.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucket).Get(keyOf(key))
		if len(cur) < 8 {
			return fmt.Errorf("boltpeer: key %d missing", key)
		}
		rev = binary.LittleEndian.Uint64(cur)
		return nil
	})
	return rev, err
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }
