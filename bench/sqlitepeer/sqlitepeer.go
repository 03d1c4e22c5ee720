// Package sqlitepeer is an SQLite peer for the statestore qualification
// benchmarks: the same compare-and-set workload as the store's durable_cas,
// run against SQLite (modernc.org/sqlite, pure Go) in WAL mode with
// synchronous=FULL, so that every committed UPDATE has been synced to the WAL
// before it returns.
//
// The table is docs(id INTEGER PRIMARY KEY, rev INTEGER, body BLOB); one CAS
// is
//
//	UPDATE docs SET body = ?, rev = rev + 1 WHERE id = ? AND rev = ?
//
// in autocommit mode, and succeeds only if exactly one row changed.
package sqlitepeer

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Workload names, as they appear in results and in qualify's --only flag.
const (
	NameCAS           = "sqlite_cas"
	NameCASConcurrent = "sqlite_cas_concurrent"
)

// ErrConflict is returned by [DB.CAS] when the row's revision was not the one
// expected, which the benchmark never provokes.
var ErrConflict = errors.New("sqlitepeer: compare-and-set conflict")

// DB is a benchmark database of keys documents of docSize bytes each, all
// created at revision 0. It tracks each key's expected revision; a key must
// be used by one goroutine at a time.
type DB struct {
	db   *sql.DB
	upd  *sql.Stmt
	revs []int64
	body []byte
}

// Open creates a fresh database file in dir with keys rows of docSize bytes,
// in WAL mode with synchronous=FULL. conns caps the connection pool; SQLite
// serialises writers anyway, and with one connection concurrent callers
// queue in database/sql instead of sleeping in SQLite's busy handler.
func Open(dir string, keys, docSize, conns int) (*DB, error) {
	if keys <= 0 || docSize <= 0 || conns <= 0 {
		return nil, fmt.Errorf("sqlitepeer: keys, docSize and conns must be positive")
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(30000)"} {
		q.Add("_pragma", p)
	}
	dsn := "file:" + filepath.Join(dir, "peer.db") + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	d := &DB{db: db, revs: make([]int64, keys), body: make([]byte, docSize)}
	for i := range d.body {
		d.body[i] = byte('a' + i%26)
	}
	if err := d.setup(keys); err != nil {
		db.Close()
		return nil, err
	}
	return d, nil
}

func (d *DB) setup(keys int) error {
	var mode string
	if err := d.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	var syncMode int
	if err := d.db.QueryRow("PRAGMA synchronous").Scan(&syncMode); err != nil {
		return err
	}
	if mode != "wal" || syncMode != 2 {
		return fmt.Errorf("sqlitepeer: journal_mode=%s synchronous=%d, want wal and 2 (FULL)", mode, syncMode)
	}
	if _, err := d.db.Exec(`CREATE TABLE docs (id INTEGER PRIMARY KEY, rev INTEGER NOT NULL, body BLOB NOT NULL)`); err != nil {
		return err
	}
	tx, err := d.db.Begin()
	if err != nil {
		return err
	}
	for k := 0; k < keys; k++ {
		if _, err := tx.Exec(`INSERT INTO docs (id, rev, body) VALUES (?, 0, ?)`, k, d.body); err != nil {
			tx.Rollback()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	d.upd, err = d.db.Prepare(`UPDATE docs SET body = ?, rev = rev + 1 WHERE id = ? AND rev = ?`)
	return err
}

// Keys returns the number of documents.
func (d *DB) Keys() int { return len(d.revs) }

// CAS replaces document key, expecting its current revision, and advances
// the revision. It returns once SQLite has committed (and, with
// synchronous=FULL, synced) the change.
func (d *DB) CAS(key int) error {
	res, err := d.upd.Exec(d.body, key, d.revs[key])
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("%w: key %d rev %d", ErrConflict, key, d.revs[key])
	}
	d.revs[key]++
	return nil
}

// Close closes the database.
func (d *DB) Close() error {
	if d.upd != nil {
		d.upd.Close()
	}
	return d.db.Close()
}
