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

// CheckpointLag is the journal bytes committed while s's last background
// checkpoint ran, which spaces the next one.
func CheckpointLag(s *Store) int64 { return s.ckpt.lag.Load() }

// CheckpointLagFactor is how many times CheckpointLag the next background
// checkpoint waits for.
const CheckpointLagFactor = ckptLagFactor

// CheckpointLagCap bounds that spacing, in journal bytes.
const CheckpointLagCap = ckptLagCap

// WaitCheckpoints waits for s's background checkpoints, and any they
// started, to finish.
func WaitCheckpoints(s *Store) { s.ckpt.wg.Wait() }

// JournalAfterImage is the journal bytes after s's newest checkpoint
// image, which the checkpoint trigger compares with its threshold.
func JournalAfterImage(s *Store) int64 { return s.ckpt.journalAfterImage() }

// DecodeEntry decodes the records of the store's raft entry at index, so
// a test can read a cluster's commit order from its raft log.
var DecodeEntry = decodeEntry
