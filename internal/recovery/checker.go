package recovery

import (
	"errors"
	"fmt"
	"io"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/rules"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// Checker applies to stored data the checks that admission applied to the
// writes that produced it. Open uses it on every replayed record and
// loaded checkpoint; tools (kpjournal verify) use it to check a store's
// files without opening the store.
type Checker struct {
	limits  quota.Limits
	schemas *schema.Registry
}

// NewChecker returns a checker for the given bounds (zero fields take
// defaults) and schemas (nil: the built-in registry).
func NewChecker(limits quota.Limits, schemas *schema.Registry) (*Checker, error) {
	l, err := limits.WithDefaults()
	if err != nil {
		return nil, err
	}
	if schemas == nil {
		schemas = schema.NewRegistry()
	}
	return &Checker{limits: l, schemas: schemas}, nil
}

// Limits returns the bounds the checker applies, defaults filled in.
func (c *Checker) Limits() quota.Limits { return c.limits }

// Schemas returns the registry documents are checked against.
func (c *Checker) Schemas() *schema.Registry { return c.schemas }

// Check reports why rec, the record at journal index index, cannot follow
// the state v (nil if it can): identifiers, revision continuity,
// DELETE/EXPIRE of a missing key, a registered schema and an owner on PUT,
// every bound, and then, within those bounds, the document against its
// schema and the content guard (CheckDocument), as at admission. Load
// applies the same checks, the document's on other goroutines.
func (c *Checker) Check(v *materialize.View, index uint64, rec *journal.Record) error {
	if err := c.checkState(v, index, rec); err != nil {
		return err
	}
	return c.CheckDocument(index, rec)
}

// checkState is Check without the document: what a record says of itself
// and what the state before it allows.
func (c *Checker) checkState(v *materialize.View, index uint64, rec *journal.Record) error {
	if err := c.CheckMetadata(rec); err != nil {
		return err
	}
	if rec.Kind == journal.KindPut {
		if le := leaseRule(rec.Namespace, rec.Key, rec.ExpiresMs); le != nil {
			le.Index = index
			return le
		}
	}
	n, old, err := v.Inspect(rec)
	if err != nil || rec.Kind != journal.KindPut {
		return err
	}
	var oldSize int64
	if old != nil {
		oldSize = old.Size()
	}
	_, bytes, nss := v.Totals()
	u := quota.Usage{Namespaces: nss, NamespaceEntries: n.Entries, TotalBytes: bytes}
	return c.CheckPut(u, rec.Namespace, old != nil, oldSize, int64(len(rec.Document)))
}

// CheckMetadata checks what a record says about itself, whatever state it
// follows: its identifiers and, for a PUT, a registered schema and an owner.
func (c *Checker) CheckMetadata(rec *journal.Record) error {
	if err := c.CheckNamespace(rec.Namespace); err != nil {
		return err
	}
	if err := c.CheckKey(rec.Key); err != nil {
		return err
	}
	if rec.Kind != journal.KindPut {
		return nil
	}
	return c.CheckPutMetadata(rec.Schema, rec.Owner)
}

// CheckNamespace is the namespace rule writes pass at admission, within
// these limits.
func (c *Checker) CheckNamespace(namespace string) error {
	return rules.Namespace(namespace, c.limits.MaxNamespaceBytes)
}

// CheckKey is the key rule writes pass at admission, within these limits.
func (c *Checker) CheckKey(key string) error { return rules.Key(key, c.limits.MaxKeyBytes) }

// CheckPutMetadata is what a PUT record must say of itself besides its
// identifiers: a registered schema and an owner.
func (c *Checker) CheckPutMetadata(schemaName, owner string) error {
	return rules.PutMetadata(c.schemas.Has, schemaName, owner)
}

// CheckLease is the rule a TTL meets at admission (the store's
// refuseLease): an entry of a namespace of live configuration
// (rules.LiveConfiguration) holds no lease. It returns a *LeaseError
// naming the entry and the namespace's class, without saying where the
// entry is stored (the caller knows: Check and the image checks fill that
// in), or nil.
func (c *Checker) CheckLease(namespace, key string, expiresMs int64) error {
	if le := leaseRule(namespace, key, expiresMs); le != nil {
		return le
	}
	return nil
}

// leaseRule is CheckLease's rule, typed.
func leaseRule(namespace, key string, expiresMs int64) *LeaseError {
	if expiresMs == 0 {
		return nil
	}
	if class := rules.LiveConfiguration(namespace); class != "" {
		return &LeaseError{Namespace: namespace, Key: key, ExpiresMs: expiresMs, Class: class}
	}
	return nil
}

// CheckPut is the bounds rule of a PUT of docBytes at (namespace, key)
// whose current entry, if exists, holds oldBytes, given the usage before
// it: Check's last rule, for a tool that follows a journal without a view.
func (c *Checker) CheckPut(u quota.Usage, namespace string, exists bool, oldBytes, docBytes int64) error {
	return c.limits.CheckPut(u, namespace, exists, oldBytes, docBytes)
}

// CheckDocument validates the document of rec, the PUT record at journal
// index index, against its schema and the content guard, as admission
// did: a *DocumentError naming the entry, the index and the rule, or nil.
// Other kinds of record carry no document.
func (c *Checker) CheckDocument(index uint64, rec *journal.Record) error {
	if rec.Kind != journal.KindPut {
		return nil
	}
	if err := c.schemas.Validate(rec.Schema, rec.Document); err != nil {
		return &DocumentError{Namespace: rec.Namespace, Key: rec.Key, Index: index, Err: err}
	}
	return nil
}

// CheckView applies the bounds, identifier and metadata rules to a whole
// loaded image (a checkpoint or backup), which its decoder bounds only
// coarsely. Its documents are LoadImage's and DecodeBackup's next check.
func (c *Checker) CheckView(v *materialize.View) error {
	_, bytes, nss := v.Totals()
	if nss > c.limits.MaxNamespaces {
		return fmt.Errorf("image holds entries in %d namespaces, over the namespaces limit %d", nss, c.limits.MaxNamespaces)
	}
	if bytes > c.limits.MaxTotalBytes {
		return fmt.Errorf("image holds %d value bytes, over the total value bytes limit %d", bytes, c.limits.MaxTotalBytes)
	}
	var err error
	v.Namespaces(func(name string, n materialize.Namespace) bool {
		if n.Entries > c.limits.MaxEntriesPerNamespace {
			err = fmt.Errorf("namespace %q holds %d entries, over the entries per namespace limit %d", name, n.Entries, c.limits.MaxEntriesPerNamespace)
		}
		if err == nil {
			err = rules.Namespace(name, c.limits.MaxNamespaceBytes)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	v.All(func(e *materialize.Entry) bool {
		if err = rules.Key(e.Key, c.limits.MaxKeyBytes); err == nil && !c.schemas.Has(e.Schema) {
			err = fmt.Errorf("entry %s/%s has the unregistered schema %q", e.Namespace, e.Key, e.Schema)
		}
		if err == nil && e.Owner == "" {
			err = fmt.Errorf("entry %s/%s has no owner", e.Namespace, e.Key)
		}
		if err == nil {
			err = c.CheckLease(e.Namespace, e.Key, e.ExpiresMs)
		}
		return err == nil
	})
	return err
}

// JournalLimits are the record decoder bounds matching these limits.
func (c *Checker) JournalLimits() journal.Limits {
	return journal.Limits{MaxNamespace: c.limits.MaxNamespaceBytes, MaxKey: c.limits.MaxKeyBytes,
		MaxSchema: quota.SchemaNameBytes, MaxOwner: quota.OwnerBytes, MaxDocument: c.limits.MaxDocumentBytes}
}

// maxNamespaceRecords bounds the namespace counter records an image may
// hold: emptied namespaces keep their counters, so this is larger than the
// live-namespace quota.
const maxNamespaceRecords = 1 << 20

// CheckpointLimits are the checkpoint decoder bounds matching these limits.
func (c *Checker) CheckpointLimits() checkpoint.Limits {
	jl := c.JournalLimits()
	return checkpoint.Limits{
		MaxNamespaces: maxNamespaceRecords,
		MaxEntries:    c.limits.MaxNamespaces * c.limits.MaxEntriesPerNamespace,
		MaxTotalBytes: c.limits.MaxTotalBytes,
		MaxNamespace:  jl.MaxNamespace, MaxKey: jl.MaxKey, MaxSchema: jl.MaxSchema,
		MaxOwner: jl.MaxOwner, MaxDocument: jl.MaxDocument,
	}
}

// LoadImage decodes the checkpoint image f with the checks Open applies
// to one: the decoder's bounds, the header's index against the file's
// name, every bound, identifier and metadata rule on the whole image, and
// then every document against its schema and the content guard. A
// document that fails is a *DocumentError naming f.Path, returned with the
// decoded image and its header: Open refuses the load there, and kpjournal
// verify goes on checking the journal from the image.
func (c *Checker) LoadImage(f checkpoint.File) (checkpoint.Header, *materialize.View, error) {
	hdr, v, err := checkpoint.ReadFile(f.Path, c.CheckpointLimits())
	if err == nil && hdr.Index != f.Index {
		err = fmt.Errorf("checkpoint %s: header index %d disagrees with its name", f.Path, hdr.Index)
	}
	if err == nil {
		err = inImage(c.CheckView(v), f.Path)
	}
	if err != nil {
		return checkpoint.Header{}, nil, err
	}
	return hdr, v, c.checkDocuments(v, f.Path)
}

// DecodeBackup reads a backup (a checkpoint image) from r with the checks
// an image gets at Open: the decoder's bounds, every bound, identifier and
// metadata rule on the whole image, then every document (a
// *DocumentError in "backup").
func (c *Checker) DecodeBackup(r io.Reader) (checkpoint.Header, *materialize.View, error) {
	hdr, v, err := checkpoint.Decode(r, c.CheckpointLimits())
	if err == nil {
		err = inImage(c.CheckView(v), backupImage)
	}
	if err == nil {
		err = c.checkDocuments(v, backupImage)
	}
	return hdr, v, err
}

// inImage says, in a *LeaseError among err, which image (a checkpoint's
// path, or backupImage) holds the entry.
func inImage(err error, image string) error {
	var le *LeaseError
	if errors.As(err, &le) {
		le.Image = image
	}
	return err
}

// LeaseError is a stored entry carrying a lease (a nonzero ExpiresMs) in a
// namespace of live configuration, which refuses every TTL at admission
// (TTL_INVALID): no write could have stored it, and a bridge's
// configuration that lapsed on replay would silently switch the bridge
// off. It says where the entry is, like a *DocumentError.
type LeaseError struct {
	Namespace, Key string
	// Index is the journal index of the PUT record; 0 for an entry of an
	// image, or when the caller reports the index itself (kpjournal verify).
	Index uint64
	// Image is the checkpoint image (its path) or "backup" holding the
	// entry; "" for a journal record.
	Image     string
	ExpiresMs int64  // the lease deadline the entry carries
	Class     string // rules.LiveConfiguration of the namespace
}

func (e *LeaseError) Error() string {
	where := ""
	switch {
	case e.Image == backupImage:
		where = " in the backup"
	case e.Image != "":
		where = " in checkpoint " + e.Image
	case e.Index != 0:
		where = fmt.Sprintf(" at journal index %d", e.Index)
	}
	return fmt.Sprintf("entry %s/%s%s carries a lease (expires_ms %d), but namespace %q is %s: live configuration takes no TTL",
		e.Namespace, e.Key, where, e.ExpiresMs, e.Namespace, e.Class)
}
