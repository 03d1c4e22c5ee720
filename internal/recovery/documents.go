package recovery

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// DocumentError is a stored document that breaks the document rules every
// write passes at admission: its schema's validator or the content guard
// (schema.Registry.Validate). It says where the document is (a journal
// record's index, or the image holding the entry) and, in Err, the rule:
// a *schema.Error whose Path is the field at fault and whose Reason is
// what the field breaks.
type DocumentError struct {
	Namespace, Key string
	// Index is the journal index of the PUT record holding the document;
	// 0 for an entry of an image.
	Index uint64
	// Image is the checkpoint image (its path) or "backup" holding the
	// entry; "" for a journal record.
	Image string
	Err   error // the *schema.Error
}

func (e *DocumentError) Error() string {
	where := fmt.Sprintf("at journal index %d", e.Index)
	switch {
	case e.Image == backupImage:
		where = "in the backup"
	case e.Image != "":
		where = "in checkpoint " + e.Image
	}
	return fmt.Sprintf("document of %s/%s %s: %v", e.Namespace, e.Key, where, e.Err)
}

// Unwrap returns the schema's rejection.
func (e *DocumentError) Unwrap() error { return e.Err }

// backupImage is DocumentError.Image for an entry of a backup being read
// (it has no path: DecodeBackup reads a stream).
const backupImage = "backup"

// MigrationHint is what an operator does when the store refuses its own
// files because a document breaks this build's rules, which happens when a
// newer build tightens a schema or the content guard under entries stored
// before: Open appends it to such a refusal. See the package comment.
const MigrationHint = "stored entries must pass this build's document rules: run the previous build, " +
	"rewrite or delete the entries kpjournal verify lists, take a checkpoint, then start this build again"

// docJob is one document for a docPool to validate.
type docJob struct {
	seq                    uint64 // the order failures are ranked in: the journal index, or the entry's rank in an image
	index                  uint64 // DocumentError.Index
	namespace, key, schema string
	doc                    []byte
}

// docBatch is how many documents go to a worker at once: validating one
// takes microseconds, a channel operation a fraction of that.
const docBatch = 32

// docPool validates documents on every processor while its caller goes
// on: a replay decoding, checking and applying the next records, or a loop
// handing out an image's entries. Validation costs about what decoding and
// applying a record does (the schema's fast path, a few microseconds for a
// 2 KB media intent), so done in line it would nearly double Open's time;
// beside the replay it costs little of it. It reports the failing document
// that comes first in seq order, so which failure is reported does not
// depend on scheduling, and is the one a one-by-one check would find.
type docPool struct {
	c     *Checker
	image string
	batch []docJob
	jobs  chan []docJob
	wg    sync.WaitGroup

	failed atomic.Bool
	mu     sync.Mutex
	first  *DocumentError
	seq    uint64 // first's
}

// newDocPool starts the workers; the caller must call wait.
func (c *Checker) newDocPool(image string) *docPool {
	n := runtime.GOMAXPROCS(0)
	p := &docPool{c: c, image: image, jobs: make(chan []docJob, 2*n)}
	p.wg.Add(n)
	for range n {
		go p.work()
	}
	return p
}

// add queues a document. The caller keeps doc unchanged until wait.
func (p *docPool) add(j docJob) {
	if p.batch == nil {
		p.batch = make([]docJob, 0, docBatch)
	}
	p.batch = append(p.batch, j)
	if len(p.batch) == docBatch {
		p.jobs <- p.batch
		p.batch = nil
	}
}

// hasFailed reports whether some document has failed already, so a caller
// may stop handing out more.
func (p *docPool) hasFailed() bool { return p.failed.Load() }

// wait validates what is queued, ends the workers and returns the first
// failure, or nil.
func (p *docPool) wait() *DocumentError {
	if len(p.batch) > 0 {
		p.jobs <- p.batch
		p.batch = nil
	}
	close(p.jobs)
	p.wg.Wait()
	return p.first
}

func (p *docPool) work() {
	defer p.wg.Done()
	for b := range p.jobs {
		for i := range b {
			j := &b[i]
			if p.failed.Load() && !p.before(j.seq) {
				continue // a failure before it is reported anyway
			}
			if err := p.c.schemas.Validate(j.schema, j.doc); err != nil {
				p.fail(j, err)
			}
		}
	}
}

// before reports whether seq comes before the failure found so far.
func (p *docPool) before(seq uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first == nil || seq < p.seq
}

func (p *docPool) fail(j *docJob, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first == nil || j.seq < p.seq {
		p.first = &DocumentError{Namespace: j.namespace, Key: j.key, Index: j.index, Image: p.image, Err: err}
		p.seq = j.seq
	}
	p.failed.Store(true)
}

// checkDocuments validates every document of the image v (named image in
// the error), as admission validated each: the rule that a checkpoint or a
// backup holds only what a write could have stored. CheckView has checked
// the image's bounds and metadata first, so every document is within its
// bound and names a registered schema.
func (c *Checker) checkDocuments(v *materialize.View, image string) error {
	p := c.newDocPool(image)
	var rank uint64
	v.All(func(e *materialize.Entry) bool {
		rank++
		p.add(docJob{seq: rank, namespace: e.Namespace, key: e.Key, schema: e.Schema, doc: e.Document})
		return !p.hasFailed()
	})
	if de := p.wait(); de != nil {
		return de
	}
	return nil
}

// errDocumentFailed stops a replay once a document has failed: what
// follows cannot change the refusal.
var errDocumentFailed = errors.New("a document failed its rules")

// locate returns de as the replay of the journal in dir refuses it: a
// *journal.CorruptError naming the segment and offset of the record at
// de.Index and wrapping de, as every other refusal of a record is.
func locate(dir string, lim journal.Limits, de *DocumentError) error {
	err := journal.ReplayDir(dir, de.Index, 0, lim, func(uint64, *journal.Record) error { return de })
	var ce *journal.CorruptError
	if errors.As(err, &ce) && ce.Index == de.Index && errors.Is(err, de) {
		return err
	}
	return &journal.CorruptError{Index: de.Index, Offset: -1, Reason: de.Error(), Err: de}
}
