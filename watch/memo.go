package watch

import "sync"

// Memo holds the encoding of what every Update of one published event has
// in common (its revision, kind, entry or key): Publish gives each event
// that reaches a watch one Memo, shared by all of its Updates, so the
// session that encodes first encodes for every watch and the others only
// copy the bytes. The registry never looks inside; the wire layer decides
// what the bytes are.
type Memo struct {
	once sync.Once
	b    []byte
	err  error
}

// Encoded returns the event's encoding, made by encode(u) at the first call
// and returned unchanged (bytes and error) by every later one, whichever
// Update of the event they pass. Concurrent callers wait for the first.
// The bytes are shared and must not be modified.
func (m *Memo) Encoded(u *Update, encode func(*Update) ([]byte, error)) ([]byte, error) {
	m.once.Do(func() { m.b, m.err = encode(u) })
	return m.b, m.err
}
