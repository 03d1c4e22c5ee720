package statestore

// MinWriteBatch is the group the write stage gathers while a sync runs.
const MinWriteBatch = minWriteBatch

// Queued reports how many ops wait in s's queue for the write stage, so a
// test can tell when every writer it started has reached the pipeline.
func Queued(s *Store) int {
	s.pipe.mu.Lock()
	defer s.pipe.mu.Unlock()
	return len(s.pipe.queue)
}
