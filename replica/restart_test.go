package replica

import (
	"testing"

	"github.com/hashicorp/raft"
)

// TestRestartCap: the replay NewRaft runs stops below the newest
// configuration entry above the restored snapshot, and within the FSM
// queue's depth beyond it.
func TestRestartCap(t *testing.T) {
	t.Parallel()
	const maxAppend = 2 // a queue of fsmQueueBatches*2 entries
	for _, tc := range []struct {
		name      string
		first     uint64 // first index stored
		configs   []uint64
		last      uint64
		commit    uint64
		snapIndex uint64
		want      uint64
	}{
		{"no configuration above the snapshot", 1, []uint64{1}, 50, 49, 10, 49},
		{"bootstrap entry, no snapshot", 1, []uint64{1}, 50, 49, 0, 0},
		{"a membership change above the snapshot", 1, []uint64{1, 30}, 50, 49, 10, 29},
		{"a change above the commit index", 1, []uint64{1, 45}, 50, 40, 10, 40},
		{"a change inside the snapshot", 20, []uint64{25}, 50, 49, 30, 49},
		{"a replay deeper than the FSM queue", 1, nil, 400, 399, 0, fsmQueueBatches * maxAppend},
		{"an empty log", 0, nil, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := raft.NewInmemStore()
			isConfig := map[uint64]bool{}
			for _, c := range tc.configs {
				isConfig[c] = true
			}
			for i := tc.first; tc.first > 0 && i <= tc.last; i++ {
				l := &raft.Log{Index: i, Term: 1, Type: raft.LogCommand}
				if isConfig[i] {
					l.Type = raft.LogConfiguration
				}
				if err := logs.StoreLog(l); err != nil {
					t.Fatal(err)
				}
			}
			got, err := RestartCap(logs, tc.commit, tc.snapIndex, maxAppend)
			if err != nil || got != tc.want {
				t.Fatalf("RestartCap = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
