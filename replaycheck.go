package statestore

import (
	"fmt"

	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// ReplayChecker applies to stored data the checks that admission applied to
// the writes that produced it. Open uses it on every replayed record and
// loaded checkpoint; tools (kpjournal verify) use it to check a store's
// files without opening the store.
type ReplayChecker struct {
	limits  quota.Limits
	schemas *schema.Registry
}

// NewReplayChecker returns a checker for the given bounds (zero fields take
// defaults) and schemas (nil: the built-in registry).
func NewReplayChecker(limits quota.Limits, schemas *schema.Registry) (*ReplayChecker, error) {
	l, err := limits.WithDefaults()
	if err != nil {
		return nil, err
	}
	if schemas == nil {
		schemas = defaultRegistry()
	}
	return &ReplayChecker{limits: l, schemas: schemas}, nil
}

// Check reports why rec cannot follow the state v (nil if it can):
// identifiers, revision continuity, DELETE/EXPIRE of a missing key, a
// registered schema and an owner on PUT, and every bound. Metadata only:
// the document was validated at admission and is covered by the frame's
// CRC; CheckDocument re-validates it in full.
func (c *ReplayChecker) Check(v *materialize.View, rec *journal.Record) error {
	if err := c.CheckMetadata(rec); err != nil {
		return err
	}
	if err := v.Check(rec); err != nil {
		return err
	}
	if rec.Kind != journal.KindPut {
		return nil
	}
	old, exists := v.Get(rec.Namespace, rec.Key)
	var oldSize int64
	if exists {
		oldSize = old.Size()
	}
	_, bytes, nss := v.Totals()
	u := quota.Usage{Namespaces: nss, NamespaceEntries: v.Namespace(rec.Namespace).Entries, TotalBytes: bytes}
	return c.limits.CheckPut(u, rec.Namespace, exists, oldSize, int64(len(rec.Document)))
}

// CheckMetadata checks what a record says about itself, whatever state it
// follows: its identifiers and, for a PUT, a registered schema and an owner.
func (c *ReplayChecker) CheckMetadata(rec *journal.Record) error {
	if err := checkNamespace(rec.Namespace, c.limits.MaxNamespaceBytes); err != nil {
		return err
	}
	if err := checkKey(rec.Key, c.limits.MaxKeyBytes); err != nil {
		return err
	}
	if rec.Kind != journal.KindPut {
		return nil
	}
	if !c.schemas.Has(rec.Schema) {
		return newErr(SchemaInvalid, "schema", "%q is not a registered schema", rec.Schema)
	}
	if rec.Owner == "" {
		return newErr(InvalidArgument, "owner", "PUT record without an owner")
	}
	return nil
}

// CheckDocument validates a PUT record's document against its schema, as
// admission did.
func (c *ReplayChecker) CheckDocument(rec *journal.Record) error {
	if rec.Kind != journal.KindPut {
		return nil
	}
	return c.schemas.Validate(rec.Schema, rec.Document)
}

// CheckView applies the bounds and identifier rules to a whole loaded
// image (a checkpoint or backup), which its decoder bounds only coarsely.
func (c *ReplayChecker) CheckView(v *materialize.View) error {
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
			err = checkNamespace(name, c.limits.MaxNamespaceBytes)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	v.All(func(e *Entry) bool {
		if err = checkKey(e.Key, c.limits.MaxKeyBytes); err == nil && !c.schemas.Has(e.Schema) {
			err = fmt.Errorf("entry %s/%s has the unregistered schema %q", e.Namespace, e.Key, e.Schema)
		}
		if err == nil && e.Owner == "" {
			err = fmt.Errorf("entry %s/%s has no owner", e.Namespace, e.Key)
		}
		return err == nil
	})
	return err
}

// JournalLimits are the record decoder bounds matching these limits.
func (c *ReplayChecker) JournalLimits() journal.Limits {
	return journal.Limits{MaxNamespace: c.limits.MaxNamespaceBytes, MaxKey: c.limits.MaxKeyBytes,
		MaxSchema: 128, MaxOwner: 128, MaxDocument: c.limits.MaxDocumentBytes}
}
