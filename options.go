package statestore

import (
	"log/slog"

	"github.com/keeppeek/statestore/clock"
	"github.com/keeppeek/statestore/internal/fault"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// StoreDirName is the directory, inside Options.Dir, that holds a store's
// files: the journal, checkpoints, the quarantine and the LOCK file.
const StoreDirName = "state-store"

// Options configure Open.
type Options struct {
	// Dir is the media server's long-term storage directory; the store
	// lives in Dir/state-store.
	Dir string
	// Limits bound the store; zero fields take the defaults of quota.Default.
	Limits quota.Limits
	// Clock is the time source for timestamps and leases; nil is the wall clock.
	Clock clock.Clock
	// Schemas validates documents; nil means schema.NewRegistry() (with
	// keeppeek.media-intent.v1 and keeppeek.mqtt-bridge.v1 built in).
	Schemas *schema.Registry
	// SegmentSize is the journal segment size; 0 means journal.DefaultSegmentSize.
	SegmentSize int
	// NoSync makes the journal skip fsync. It exists only so benchmarks can
	// isolate the cost of everything but the disk; a store opened with it
	// loses acknowledged writes on a crash.
	NoSync bool
	// NoPrewrite keeps the journal's tail segment append-only instead of
	// pre-written with zeros ahead of the records (journal.Options
	// NoPrewrite): for measuring what pre-writing gains, and for tests
	// that count fdatasyncs.
	NoPrewrite bool
	// DirectSync never runs fdatasync through io_uring (journal.Options
	// DirectSync): every sync holds its goroutine's processor in the
	// system call. For kernels where io_uring is allowed but not wanted,
	// and for measuring what parking gains.
	DirectSync bool
	// Logger receives reports such as a torn journal tail cut at open; nil
	// discards them.
	Logger *slog.Logger
	// CheckpointBytes is how many journal bytes may follow the newest
	// checkpoint before one is written in the background. The count is of
	// the journal as it stands on disk, records replayed at Open included,
	// so a store that restarts often still checkpoints (right after Open
	// when it is already over). 0 means DefaultCheckpointBytes, negative
	// disables automatic checkpoints. Under heavy writes the threshold is
	// raised to sixteen times the journal bytes committed while the previous
	// background checkpoint ran (see checkpoint.go).
	CheckpointBytes int64
	// Settings is the path of the media server's config.toml; its
	// [state_store] section declares the settings-backed namespaces and
	// holds their entries (see settings.go). "" means none.
	Settings string
	// ReserveBytes is the journal space held back so that deletes, lease
	// expiries and the restart purge still commit on a full disk (see
	// "Full disk" in the package documentation); 0 means
	// journal.DefaultReserveBytes, negative keeps none.
	ReserveBytes int64
	// Faults is a test seam of this module: the hooks every fsync of this
	// store consults first (its journal's, its checkpoints', its directory
	// syncs), so a test fails one store's disk and no other. nil in real use.
	Faults *fault.Hooks
}
