package recovery_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// forbidden are documents that pass no rule, each for another reason.
var forbidden = []string{`not json at all`, `{"password":"hunter2"}`, `{"role":"publish","desired":true,"source_id":"cam","media_kind":"video"}`,
	`{"role":"subscribe","desired":true,"source_id":"cam","media_kind":"video","note":"-----BEGIN PRIVATE KEY-----"}`}

// randomPuts is n PUTs over a few keys of user/alice, each document
// forbidden with probability bad.
func randomPuts(rng *rand.Rand, n int, bad float64) []*journal.Record {
	recs := make([]*journal.Record, n)
	for i := range recs {
		doc := docN(i)
		if rng.Float64() < bad {
			doc = []byte(forbidden[rng.IntN(len(forbidden))])
		}
		recs[i] = &journal.Record{Kind: journal.KindPut, Namespace: "user/alice", Key: fmt.Sprintf("k%d", rng.IntN(50)), Revision: uint64(i + 1),
			TimeMs: 1, Schema: schema.MediaIntentV1, Owner: "alice", CreatedMs: 1, UpdatedMs: 1, Document: doc}
	}
	return recs
}

// TestLoadReportsTheFirstFailureAsCheckDoes: Load validates documents on
// several goroutines beside the replay; whatever the scheduling, it
// refuses exactly where Checker.Check, record by record, first fails, with
// the same error, located at the record's segment and offset.
func TestLoadReportsTheFirstFailureAsCheckDoes(t *testing.T) {
	t.Parallel()
	chk, err := recovery.NewChecker(quota.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 29))
			recs := randomPuts(rng, 300+rng.IntN(300), []float64{0, 0.002, 0.01, 0.3}[seed%4])
			dir := t.TempDir()
			j, _, err := journal.Open(filepath.Join(dir, statestore.StoreDirName, "journal"), journal.Options{NoPrewrite: true, SegmentSize: 32 << 10})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Append(recs); err != nil {
				t.Fatal(err)
			}
			j.Close()

			v := materialize.New()
			var want error
			var at uint64
			for i, rec := range recs {
				if want = chk.Check(v, uint64(i+1), rec); want != nil {
					at = uint64(i + 1)
					break
				}
				if _, err := v.Apply(rec); err != nil {
					t.Fatal(err)
				}
			}
			st, err := recovery.LoadState(dir, 0, recovery.LoadOptions{})
			if want == nil {
				if err != nil || st.Index != uint64(len(recs)) {
					t.Fatalf("Check accepts every record, LoadState: %v", err)
				}
				return
			}
			var ce *journal.CorruptError
			var de *recovery.DocumentError
			if !errors.As(err, &ce) || ce.Index != at || ce.Segment == "" || ce.Reason != want.Error() || !errors.As(err, &de) || de.Index != at {
				t.Fatalf("LoadState: %v; Check refuses index %d: %v", err, at, want)
			}
		})
	}
}

// TestLoadImageNamesTheFirstForbiddenEntry: an image's documents are
// validated on several goroutines, and LoadImage names the first entry in
// key order that fails, with the image's path, as a check entry by entry
// would (and returns the decoded image, which verify replays from); an
// image without one loads.
func TestLoadImageNamesTheFirstForbiddenEntry(t *testing.T) {
	t.Parallel()
	chk, err := recovery.NewChecker(quota.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := schema.NewRegistry()
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 4))
			v := materialize.New()
			for _, rec := range randomPuts(rng, 400, []float64{0, 0.005, 0.05, 0.5}[seed%4]) {
				if _, err := v.Apply(rec); err != nil {
					t.Fatal(err)
				}
			}
			var first *materialize.Entry
			v.All(func(e *materialize.Entry) bool {
				if reg.Validate(e.Schema, e.Document) != nil {
					first = e
				}
				return first == nil
			})
			path := filepath.Join(t.TempDir(), checkpoint.Name(400))
			if _, err := checkpoint.WriteFile(path, v, 400, 1); err != nil {
				t.Fatal(err)
			}
			_, got, err := chk.LoadImage(checkpoint.File{Path: path, Index: 400})
			if first == nil {
				if err != nil || got == nil {
					t.Fatalf("an image of valid documents: %v", err)
				}
				return
			}
			var de *recovery.DocumentError
			if !errors.As(err, &de) || de.Namespace != first.Namespace || de.Key != first.Key || de.Image != path || de.Index != 0 || got == nil {
				t.Fatalf("LoadImage: %v; want the first forbidden entry %s/%s in %s", err, first.Namespace, first.Key, path)
			}
			if want := reg.Validate(first.Schema, first.Document); de.Err.Error() != want.Error() {
				t.Fatalf("rule %v, want %v", de.Err, want)
			}
		})
	}
}

// racingDocs is the schedule that tells "the first failure" from "the
// failure found first": the first docBatch documents are large (slow to
// validate), the last of them forbidden, and every later one is a small
// forbidden one (refused at its first byte), so the worker handed the
// second batch finds a failure long before the worker handed the first.
func racingDocs() [][]byte {
	const batch = 32 // recovery's docBatch
	docs := make([][]byte, 3*batch)
	for i := range docs {
		switch {
		case i < batch-1:
			docs[i] = testdoc.MediaIntent(15000, i)
		case i == batch-1:
			big := testdoc.MediaIntent(15000, i)
			docs[i] = append(big[:len(big)-2:len(big)-2], `,"transcoder.password":"x"}}`...)
		default:
			docs[i] = []byte("x")
		}
	}
	return docs
}

// TestFirstFailureWhateverFinishesFirst runs that schedule through a
// replay and an image: the refusal names document 32, never one the other
// worker refused earlier.
func TestFirstFailureWhateverFinishesFirst(t *testing.T) {
	t.Parallel()
	docs := racingDocs()
	recs := make([]*journal.Record, len(docs))
	v := materialize.New()
	for i, doc := range docs {
		recs[i] = &journal.Record{Kind: journal.KindPut, Namespace: "user/alice", Key: fmt.Sprintf("k%03d", i+1), Revision: uint64(i + 1),
			TimeMs: 1, Schema: schema.MediaIntentV1, Owner: "alice", CreatedMs: 1, UpdatedMs: 1, Document: doc}
		if _, err := v.Apply(recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		dir := t.TempDir()
		j, _, err := journal.Open(filepath.Join(dir, statestore.StoreDirName, "journal"), journal.Options{NoPrewrite: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(recs); err != nil {
			t.Fatal(err)
		}
		j.Close()
		var de *recovery.DocumentError
		if _, err := recovery.LoadState(dir, 0, recovery.LoadOptions{}); !errors.As(err, &de) || de.Index != 32 {
			t.Fatalf("replay: %v; want the document at index 32", err)
		}
		path := filepath.Join(dir, checkpoint.Name(uint64(len(recs))))
		if _, err := checkpoint.WriteFile(path, v, uint64(len(recs)), 1); err != nil {
			t.Fatal(err)
		}
		chk, _ := recovery.NewChecker(quota.Limits{}, nil)
		if _, _, err := chk.LoadImage(checkpoint.File{Path: path, Index: uint64(len(recs))}); !errors.As(err, &de) || de.Key != "k032" {
			t.Fatalf("image: %v; want the entry k032", err)
		}
	}
}
