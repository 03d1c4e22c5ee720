package statestore

// Capability is the server capability that advertises the state store's
// generic commands (GetState, PutState, DeleteState, WatchState,
// UnwatchState, WatchStateAck). It is advertised only while a store is
// open: a client must never be offered durability the server cannot
// deliver.
const Capability = "keeppeek.state-store.v1"

// Capabilities returns the capabilities the embedder should advertise for
// this store: Capability while the store is open, none once it is closed.
func (s *Store) Capabilities() []string {
	s.pipe.mu.Lock()
	closed := s.pipe.closed
	s.pipe.mu.Unlock()
	if closed {
		return nil
	}
	return []string{Capability}
}
