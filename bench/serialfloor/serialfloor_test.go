package serialfloor

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tidwall/wal"

	"github.com/keeppeek/statestore/bench/harness"
	"github.com/keeppeek/statestore/bench/serialwork"
	"github.com/keeppeek/statestore/journal"
)

// TestPayloadIsTheWorkloads: the floor journals serialwork's owners'
// bytes (namespace, key, document) with the journal's segment size.
func TestPayloadIsTheWorkloads(t *testing.T) {
	t.Parallel()
	if Owners != serialwork.Owners || Key != serialwork.Key || SegmentSize != journal.DefaultSegmentSize {
		t.Fatalf("Owners %d, Key %q, SegmentSize %d; want serialwork's %d, %q and the journal's %d", Owners, Key, SegmentSize, serialwork.Owners, serialwork.Key, journal.DefaultSegmentSize)
	}
	pay := Payloads(Owners)
	for i, o := range serialwork.NewOwners(Owners) {
		want := append([]byte(o.Namespace+"\x00"+serialwork.Key+"\x00"), o.Doc...)
		if !bytes.Equal(pay[i], want) {
			t.Fatalf("owner %d: payload of %d bytes, want its namespace, the key and its %d-byte document", i, len(pay[i]), len(o.Doc))
		}
	}
}

// TestRunWritesEveryEntryDurably runs past a segment change on both sides
// and checks the figures and, through a side's own log, that every entry
// is there in order, including across the seal, and that the durable
// side's fdatasync follows the segment tidwall/wal writes to.
func TestRunWritesEveryEntryDurably(t *testing.T) {
	t.Parallel()
	fig, err := Run(t.TempDir(), 2*Owners, harness.Runner{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fig.Results) != 2 || fig.Results[0].Name != WALFdatasync || fig.Results[1].Name != WALNoSync || len(fig.RoundRSS) != 2 || fig.IdleRSS < 1<<20 || fig.Idle < 300e6 {
		t.Fatalf("figures %+v: want both sides, 2 round samples, an idle sample", fig)
	}

	dir := filepath.Join(t.TempDir(), "log")
	s, err := newSide(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	pay := Payloads(Owners)
	n := 0
	for tails := 0; tails < 2; n++ {
		before := s.tail.Name()
		if err := s.append(pay[n%Owners]); err != nil {
			t.Fatal(err)
		}
		if s.tail.Name() != before {
			tails++
			segs, _ := filepath.Glob(filepath.Join(dir, "0*"))
			if len(segs) == 0 || segs[len(segs)-1] != s.tail.Name() {
				t.Fatalf("after entry %d the side syncs %s, tidwall/wal's newest segment is %v", n+1, s.tail.Name(), segs)
			}
		}
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	l, err := wal.Open(dir, &wal.Options{LogFormat: wal.Binary})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range n {
		got, err := l.Read(uint64(i + 1))
		if err != nil || !bytes.Equal(got, pay[i%Owners]) {
			t.Fatalf("entry %d of %d: %d bytes, %v; want owner %d's payload", i+1, n, len(got), err, i%Owners)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}
