package torture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

// Namespaces and keys the child uses.
const (
	casNS     = "group/torture"
	leaseNS   = "service/torture"
	casKeys   = 6
	leaseKeys = 2
	writers   = 6
	leaseTTL  = time.Second
)

// keepBackups is how many backup files the child leaves in place.
const keepBackups = 3

// BackupDir is where the child writes backups, inside the storage directory.
func BackupDir(dir string) string { return filepath.Join(dir, "torture-backups") }

// StoreOptions are the options of the child's store and of the parent's
// reopen: small segments and a low checkpoint threshold, so kills land in
// segment changes, checkpoints and journal truncations as well as in
// commits.
func StoreOptions(dir string) statestore.Options {
	return statestore.Options{Dir: dir, SegmentSize: 16 << 10, CheckpointBytes: 8 << 10}
}

func casKey(i int) string   { return fmt.Sprintf("k%d", i) }
func leaseKey(i int) string { return fmt.Sprintf("leases/l%d", i) }

// document is a schema-valid document carrying a unique value id.
func document(value string) []byte {
	return fmt.Appendf(nil, `{"role":"subscribe","desired":true,"source_id":%q,"media_kind":"video"}`, value)
}

// valueOf returns the value id document put in d.
func valueOf(d []byte) (string, error) {
	var v struct {
		SourceID string `json:"source_id"`
	}
	if err := json.Unmarshal(d, &v); err != nil || v.SourceID == "" {
		return "", fmt.Errorf("document %q carries no value id: %v", d, err)
	}
	return v.SourceID, nil
}

// child is one child process's state.
type child struct {
	s    *statestore.Store
	dir  string
	seed uint64
	mu   sync.Mutex // serializes lines, so their order is real-time order
	out  *bufio.Writer
	op   uint64 // under mu
	fail chan error
}

// RunChild is the child role: it opens the store in dir and runs the
// workload until killed, writing events to out (see protocol.go). seed
// makes value ids unique across cycles. It returns only on a failure that
// is not a violation of the store's contract (the store refused to open,
// an unexpected error code): the parent counts that as a violation too.
func RunChild(dir string, seed uint64, out io.Writer) error {
	s, err := statestore.Open(StoreOptions(dir))
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if err := os.MkdirAll(BackupDir(dir), 0o755); err != nil {
		return err
	}
	c := &child{s: s, dir: dir, seed: seed, out: bufio.NewWriter(out), fail: make(chan error, 1)}
	c.line(lineReady)
	for w := range writers {
		go c.writer(w)
	}
	go c.leases()
	go c.watcher()
	go c.checkpoints()
	go c.backups()
	return <-c.fail
}

// line writes one event and flushes it, so a kill loses at most the lines
// of calls that had not returned.
func (c *child) line(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, format+"\n", args...)
	c.out.Flush()
}

// issue prints a call line and returns its operation number.
func (c *child) issue(cl call) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.op++
	fmt.Fprintln(c.out, formatCall(c.op, cl))
	c.out.Flush()
	return c.op
}

func (c *child) die(err error) {
	select {
	case c.fail <- err:
	default:
	}
	select {} // the process exits from RunChild's caller
}

var admin = statestore.Principal{ID: "torture", Admin: true}

// resultOf turns a store answer into a result; any code but the expected
// ones ends the child.
func (c *child) resultOf(e statestore.Entry, err error) result {
	var se *statestore.Error
	switch {
	case err == nil:
		return result{Code: codeOK, Rev: e.Revision}
	case errors.Is(err, statestore.ErrNotFound):
		return result{Code: codeNotFound}
	case errors.As(err, &se) && se.Code == statestore.Conflict:
		return result{Code: codeConflict, Rev: se.CurrentRevision}
	}
	c.die(err)
	return result{}
}

// writer runs reads, compare-and-set writes, blind writes and deletes on
// the hot keys, forever.
func (c *child) writer(w int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(c.seed, uint64(w)))
	for i := 0; ; i++ {
		key := casKey(rng.IntN(casKeys))
		op := c.issue(call{Kind: opGet, Key: key})
		e, err := c.s.Get(ctx, admin, casNS, key)
		r := c.resultOf(e, err)
		if r.Code == codeOK {
			if r.Value, err = valueOf(e.Document); err != nil {
				c.die(err)
			}
		}
		c.line("%s", formatResult(op, r))
		expect := int64(0)
		if r.Code == codeOK {
			expect = int64(r.Rev)
		}
		switch p := rng.IntN(10); {
		case p < 2 && r.Code == codeOK:
			cl := call{Kind: opDel, Key: key, Expect: expect}
			op := c.issue(cl)
			rev, err := c.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: casNS, Key: key, Expect: statestore.IfRevision(r.Rev)})
			c.line("%s", formatResult(op, c.resultOf(statestore.Entry{Revision: rev}, err)))
		default:
			cl := call{Kind: opPut, Key: key, Expect: expect, Value: fmt.Sprintf("s%d.w%d.%d", c.seed, w, i)}
			x := statestore.CreateOnly
			switch {
			case p == 9:
				cl.Expect, x = blind, statestore.Expect{}
			case r.Code == codeOK:
				x = statestore.IfRevision(r.Rev)
			}
			op := c.issue(cl)
			e, err := c.s.Put(ctx, admin, statestore.PutRequest{Namespace: casNS, Key: key, Schema: schema.MediaIntentV1, Document: document(cl.Value), Expect: x})
			c.line("%s", formatResult(op, c.resultOf(e, err)))
		}
	}
}

// leases claims each lease key create-only with a TTL and renews it with
// compare-and-set before it lapses; a lapsed or lost lease is claimed
// again.
func (c *child) leases() {
	ctx := context.Background()
	held := make([]uint64, leaseKeys) // revision held, 0 when none
	for i := 0; ; i++ {
		k := i % leaseKeys
		x := statestore.CreateOnly
		if held[k] != 0 {
			x = statestore.IfRevision(held[k])
		}
		e, err := c.s.Put(ctx, admin, statestore.PutRequest{Namespace: leaseNS, Key: leaseKey(k), Schema: schema.MediaIntentV1,
			Document: document(fmt.Sprintf("s%d.lease.%d", c.seed, i)), Expect: x, TTL: leaseTTL})
		switch r := c.resultOf(e, err); r.Code {
		case codeOK:
			held[k] = e.Revision
			c.line("L %s %d %d", leaseKey(k), e.Revision, e.ExpiresMs)
		default:
			held[k] = 0 // lapsed or taken: claim again next time
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watcher watches both namespaces and checks every message: updates
// follow the snapshot with sequences 1, 2, 3, ... and revisions above the
// snapshot's and each other. It acknowledges each update, and replaces a
// watch the store closed.
func (c *child) watcher() {
	ctx := context.Background()
	sink := watch.NewChanSink(0)
	ss, err := c.s.OpenSession(admin, sink)
	if err != nil {
		c.die(err)
	}
	type state struct{ seq, rev uint64 }
	watches := map[string]*state{}
	n := 0
	start := func(ns string) {
		n++
		id := fmt.Sprintf("w%d", n)
		res, err := c.s.Watch(ctx, ss, statestore.WatchRequest{WatchID: id, Namespace: ns})
		if err != nil {
			c.die(err)
		}
		watches[id] = &state{rev: res.SnapshotRevision}
	}
	nsOf := map[string]string{}
	for _, ns := range []string{casNS, leaseNS} {
		start(ns)
		nsOf[fmt.Sprintf("w%d", n)] = ns
	}
	for m := range sink.C() {
		switch m := m.(type) {
		case *watch.Update:
			st := watches[m.WatchID]
			if st == nil {
				c.line("V watch %s: update for a watch never registered", m.WatchID)
				continue
			}
			if m.Sequence != st.seq+1 || m.Revision <= st.rev {
				c.line("V watch %s: update sequence %d revision %d after sequence %d revision %d", m.WatchID, m.Sequence, m.Revision, st.seq, st.rev)
			}
			st.seq, st.rev = m.Sequence, m.Revision
			// NOT_FOUND: the store closed the watch (its buffer
			// overflowed while this goroutine was printing); the Closed
			// message follows and the watch is replaced then.
			if err := c.s.Ack(ss, m.WatchID, m.Sequence); err != nil && !errors.Is(err, statestore.ErrNotFound) {
				c.die(err)
			}
			c.line(evUpdate)
		case *watch.Closed:
			ns := nsOf[m.WatchID]
			delete(watches, m.WatchID)
			start(ns)
			nsOf[fmt.Sprintf("w%d", n)] = ns
		}
	}
}

// checkpoints writes a checkpoint every few milliseconds, besides the
// automatic ones.
func (c *child) checkpoints() {
	for {
		time.Sleep(15 * time.Millisecond)
		if err := c.s.Checkpoint(); err != nil {
			c.die(err)
		}
		c.line(evCkpt)
	}
}

// backups writes an online backup every few tens of milliseconds into
// BackupDir, durably, reporting each, and keeps the newest few.
func (c *child) backups() {
	for i := 0; ; i++ {
		time.Sleep(40 * time.Millisecond)
		path := filepath.Join(BackupDir(c.dir), fmt.Sprintf("backup-s%d-%d.ckpt", c.seed, i))
		if err := disk.WriteAtomic(path, c.s.Backup); err != nil {
			c.die(err)
		}
		c.line("B %s", path)
		if i >= keepBackups {
			os.Remove(filepath.Join(BackupDir(c.dir), fmt.Sprintf("backup-s%d-%d.ckpt", c.seed, i-keepBackups)))
		}
	}
}
