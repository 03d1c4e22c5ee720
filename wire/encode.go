package wire

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire/wiresize"
)

// Field numbers of state_store.proto that the update encoding depends on.
// A renumbering there fails TestEncodeFieldNumbers, which reads them from
// the generated descriptors.
const (
	fieldServerWatchUpdate protowire.Number = 3 // ServerMessage.watch_update
	fieldUpdateWatchID     protowire.Number = 1 // StateStoreWatchUpdate.watch_id
	fieldUpdateSequence    protowire.Number = 2 // StateStoreWatchUpdate.watch_sequence
	fieldUpdateRevision    protowire.Number = 3
	fieldUpdateKind        protowire.Number = 4
	fieldUpdateEntry       protowire.Number = 5
	fieldUpdateKey         protowire.Number = 6
)

// InvalidUTF8Error is a string field that proto3 requires to be UTF-8 and
// is not: proto.Marshal refuses the message, and so does the encoder here,
// rather than send bytes the peer's decoder would refuse.
type InvalidUTF8Error struct {
	Field string // e.g. "watch_update.entry.owner"
}

// Error names the field.
func (e *InvalidUTF8Error) Error() string {
	return fmt.Sprintf("wire: %s is not valid UTF-8, which a proto3 string must be", e.Field)
}

// UpdateSize returns the length of the encoding AppendUpdate writes for u:
// the ServerMessage whose watch_update is Update(u), byte for byte what
// proto.Marshal makes of it. With u.Memo set, the part every watch of the
// event shares (revision, kind, entry or key) is encoded at the event's
// first call, by whichever session makes it, and reused by the rest; an
// error is then the same for every watch of the event.
func UpdateSize(u *watch.Update) (int, error) {
	tail, n, err := updateTail(u)
	if err != nil {
		return 0, err
	}
	if tail != nil {
		n = len(tail)
	}
	inner := updateHeadSize(u) + n
	return protowire.SizeTag(fieldServerWatchUpdate) + protowire.SizeBytes(inner), nil
}

// AppendUpdate appends to b the ServerMessage carrying u as its
// watch_update, as proto.Marshal encodes it (fields in number order, zero
// values left out): the outer tag and length, then watch_id and
// watch_sequence, the only fields that differ between the watches an event
// reaches, then the event's shared bytes unchanged (see UpdateSize). A
// string that is not UTF-8 is an *InvalidUTF8Error, and b is returned as
// it was.
func AppendUpdate(b []byte, u *watch.Update) ([]byte, error) {
	tail, n, err := updateTail(u)
	if err != nil {
		return b, err
	}
	return appendUpdate(b, u, tail, n), nil
}

// AppendCheckedUpdate is AppendUpdate for an update that UpdateSize
// accepted: its strings are not checked again, so a writer that sized the
// update when it queued it pays for the checks once. An update UpdateSize
// refused gets bytes that do not decode.
func AppendCheckedUpdate(b []byte, u *watch.Update) []byte {
	var tail []byte
	n := 0
	if u.Memo != nil {
		// The Memo holds the first call's result: UpdateSize's, accepted.
		tail, _ = u.Memo.Encoded(u, encodeUpdateTail)
	} else {
		n = updateTailSize(u)
	}
	return appendUpdate(b, u, tail, n)
}

// appendUpdate appends u's message around its shared part tail, or, when
// tail is nil, around the n bytes appendUpdateTail writes.
func appendUpdate(b []byte, u *watch.Update, tail []byte, n int) []byte {
	if tail != nil {
		n = len(tail)
	}
	b = protowire.AppendTag(b, fieldServerWatchUpdate, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(updateHeadSize(u)+n))
	b = appendString(b, fieldUpdateWatchID, u.WatchID)
	b = appendUint(b, fieldUpdateSequence, u.Sequence)
	if tail != nil {
		return append(b, tail...)
	}
	return appendUpdateTail(b, u)
}

// updateTail checks u's strings and returns the event's shared encoding
// when u has a Memo, or else nil and the length appendUpdateTail will
// write.
func updateTail(u *watch.Update) (tail []byte, n int, err error) {
	if !utf8.ValidString(u.WatchID) {
		return nil, 0, &InvalidUTF8Error{Field: "watch_update.watch_id"}
	}
	if u.Memo != nil {
		tail, err = u.Memo.Encoded(u, encodeUpdateTail)
		return tail, 0, err
	}
	if err := checkUpdateTail(u); err != nil {
		return nil, 0, err
	}
	return nil, updateTailSize(u), nil
}

// encodeUpdateTail is the Memo's encoder: the event's part in a buffer of
// its own, exactly sized.
func encodeUpdateTail(u *watch.Update) ([]byte, error) {
	if err := checkUpdateTail(u); err != nil {
		return nil, err
	}
	return appendUpdateTail(make([]byte, 0, updateTailSize(u)), u), nil
}

// hasEntry reports whether Update(u) carries the entry rather than the key.
func hasEntry(u *watch.Update) bool { return u.Kind == watch.Put && u.Entry != nil }

func checkUpdateTail(u *watch.Update) error {
	if !hasEntry(u) {
		if !utf8.ValidString(u.Key) {
			return &InvalidUTF8Error{Field: "watch_update.key"}
		}
		return nil
	}
	e := u.Entry
	for _, f := range [...]struct{ name, s string }{
		{"namespace", e.Namespace}, {"key", e.Key}, {"schema", e.Schema}, {"owner", e.Owner},
	} {
		if !utf8.ValidString(f.s) {
			return &InvalidUTF8Error{Field: "watch_update.entry." + f.name}
		}
	}
	return nil
}

func updateHeadSize(u *watch.Update) int {
	return wiresize.StringSize(fieldUpdateWatchID, u.WatchID) + wiresize.UintSize(fieldUpdateSequence, u.Sequence)
}

func updateTailSize(u *watch.Update) int {
	n := wiresize.UintSize(fieldUpdateRevision, u.Revision) + wiresize.UintSize(fieldUpdateKind, uint64(Kind(u.Kind)))
	if hasEntry(u) {
		// A set message field is encoded even when the message is empty.
		return n + protowire.SizeTag(fieldUpdateEntry) + protowire.SizeBytes(wiresize.EntrySize(u.Entry))
	}
	return n + wiresize.StringSize(fieldUpdateKey, u.Key)
}

func appendUpdateTail(b []byte, u *watch.Update) []byte {
	b = appendUint(b, fieldUpdateRevision, u.Revision)
	b = appendUint(b, fieldUpdateKind, uint64(Kind(u.Kind)))
	if hasEntry(u) {
		b = protowire.AppendTag(b, fieldUpdateEntry, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(wiresize.EntrySize(u.Entry)))
		return appendEntry(b, u.Entry)
	}
	return appendString(b, fieldUpdateKey, u.Key)
}

// appendEntry appends e's StateEntry fields (wire.Entry(e)), whose length
// is wiresize.EntrySize(e).
func appendEntry(b []byte, e *materialize.Entry) []byte {
	b = appendString(b, wiresize.FieldEntryNamespace, e.Namespace)
	b = appendString(b, wiresize.FieldEntryKey, e.Key)
	b = appendString(b, wiresize.FieldEntrySchema, e.Schema)
	b = appendString(b, wiresize.FieldEntryOwner, e.Owner)
	b = appendUint(b, wiresize.FieldEntryRevision, e.Revision)
	// int64 fields are varints of the two's complement.
	b = appendUint(b, wiresize.FieldEntryCreatedAtMs, uint64(e.CreatedMs))
	b = appendUint(b, wiresize.FieldEntryUpdatedAtMs, uint64(e.UpdatedMs))
	b = appendUint(b, wiresize.FieldEntryExpiresAtMs, uint64(e.ExpiresMs))
	if len(e.Document) > 0 {
		b = protowire.AppendTag(b, wiresize.FieldEntryDocument, protowire.BytesType)
		b = protowire.AppendBytes(b, e.Document)
	}
	return b
}

// A proto3 field without presence is left out at its zero value.

func appendString(b []byte, n protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendUint(b []byte, n protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}
