package statestore_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

// TestBackupDuringWritesIsOneCommitPoint takes a backup while writers run
// and checks it equals the journal replayed to exactly the backup's index.
func TestBackupDuringWritesIsOneCommitPoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *statestore.Options) { o.CheckpointBytes = -1 })
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				ns := fmt.Sprintf("group/b%d", w%3)
				key := fmt.Sprintf("k%d", i%20)
				if i%4 == 3 {
					f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: key})
				} else if _, err := f.put(admin, ns, key, docN(w*10000+i), statestore.Expect{}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	for f.s.Namespace("group/b0").Revision < 200 {
		f.s.Get(ctx, admin, "group/b0", "k0")
	}
	var backup bytes.Buffer
	if err := f.s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	for f.s.Namespace("group/b0").Revision < 400 {
		f.s.Get(ctx, admin, "group/b0", "k0")
	}
	stop.Store(true)
	wg.Wait()
	hdr, err := checkpoint.ReadHeader(bytes.NewReader(backup.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// The state at exactly hdr.Index, rebuilt from the journal.
	want := materialize.New()
	err = journal.ReplayDir(filepath.Join(f.dir, statestore.StoreDirName, "journal"), 1, 0, journal.Limits{}, func(idx uint64, r *journal.Record) error {
		if idx <= hdr.Index {
			_, err := want.Apply(r)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := statestore.RestoreDir(dir, bytes.NewReader(backup.Bytes()), f.opts.Limits); err != nil {
		t.Fatal(err)
	}
	s2, err := statestore.Open(statestore.Options{Dir: dir, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, _ := wholeImage(t, s2)
	if !reflect.DeepEqual(got, imageOf(want)) {
		t.Fatalf("restored backup differs from the journal replayed to its index %d", hdr.Index)
	}
	// New writes in the restored store continue its revisions.
	before := s2.Namespace("group/b0").Revision
	e, err := s2.Put(ctx, admin, statestore.PutRequest{Namespace: "group/b0", Key: "after", Schema: schema.MediaIntentV1, Document: docN(1)})
	if err != nil || e.Revision != before+1 {
		t.Fatalf("write after restore: %+v %v (want revision %d)", e, err, before+1)
	}
}

func TestRestoreIntoOpenStore(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	workload(t, src, 300, 9)
	// A write commits every lease already due, so the backup holds none
	// that the restore would expire at the same instant.
	src.mustPut(admin, "group/g0", "flush", docN(0))
	var backup bytes.Buffer
	if err := src.s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	want, _ := wholeImage(t, src.s)

	dst := newFixture(t)
	workload(t, dst, 200, 10)
	dst.clock.Set(src.clock.Now())
	if err := dst.s.Restore(bytes.NewReader(backup.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got, _ := wholeImage(t, dst.s); !reflect.DeepEqual(got, want) {
		t.Fatal("restored state differs from the backup's")
	}
	dst.reopen()
	if got, _ := wholeImage(t, dst.s); !reflect.DeepEqual(got, want) {
		t.Fatal("restored state did not survive a reopen")
	}
}

func TestRestoreRefusesBadBackups(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	for i := 0; i < 20; i++ {
		src.mustPut(admin, "group/g", fmt.Sprintf("k%d", i), testdoc.MediaIntent(specDocBytes, i))
	}
	var good bytes.Buffer
	src.s.Backup(&good)
	newer := bytes.Clone(good.Bytes())
	binary.LittleEndian.PutUint16(newer[8:], checkpoint.FormatVersion+1)
	damaged := bytes.Clone(good.Bytes())
	damaged[len(damaged)/2] ^= 1
	tests := []struct {
		name   string
		data   []byte
		limits func(*statestore.Options)
		want   string
	}{
		{"newer format version", newer, nil, "version"},
		{"damaged", damaged, nil, ""},
		{"over the byte limit", good.Bytes(), func(o *statestore.Options) { o.Limits.MaxTotalBytes = 10 * specDocBytes }, ""},
		{"over the entries limit", good.Bytes(), func(o *statestore.Options) { o.Limits.MaxEntriesPerNamespace = 5 }, "entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mods := []func(*statestore.Options){}
			if tc.limits != nil {
				mods = append(mods, tc.limits)
			}
			dst := newFixture(t, mods...)
			dst.mustPut(admin, "group/keep", "k", docN(1))
			before, idx := wholeImage(t, dst.s)
			err := dst.s.Restore(bytes.NewReader(tc.data))
			wantCode(t, err, statestore.InvalidArgument, "backup")
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
			if after, idx2 := wholeImage(t, dst.s); !reflect.DeepEqual(after, before) || idx2 != idx {
				t.Fatal("a refused restore changed the store")
			}
			err = statestore.RestoreDir(t.TempDir(), bytes.NewReader(tc.data), dst.opts.Limits)
			wantCode(t, err, statestore.InvalidArgument, "backup")
		})
	}
}

// TestRestoreRefusesForbiddenDocument restores the backup issue 29 found
// served (testdata/forbidden/password.kpbak, {"password":"hunter2"} under
// user/alice/intents/secret): Restore into the open store and RestoreDir
// into an empty directory both refuse it with INVALID_ARGUMENT naming the
// entry and the rule, after every check of its metadata, and change no
// file and no entry.
func TestRestoreRefusesForbiddenDocument(t *testing.T) {
	t.Parallel()
	backup, err := os.ReadFile(forbiddenBackup)
	if err != nil {
		t.Fatal(err)
	}
	checkRefusal := func(what string, err error) {
		t.Helper()
		wantCode(t, err, statestore.InvalidArgument, "backup")
		var de *statestore.DocumentError
		var se *schema.Error
		if !errors.As(err, &de) || de.Namespace != "user/alice" || de.Key != "intents/secret" || de.Image != "backup" || de.Index != 0 ||
			!errors.As(err, &se) || se.Path != "$.password" {
			t.Fatalf("%s: %v; want a DocumentError for user/alice/intents/secret in the backup at $.password", what, err)
		}
		if want := "document of user/alice/intents/secret in the backup: schema keeppeek.media-intent.v1: $.password"; !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %q does not say %q", what, err, want)
		}
	}

	// No pre-writing: its zeros, written in the background, would change
	// the journal's files while the test compares them.
	f := newFixture(t, func(o *statestore.Options) { o.NoPrewrite = true })
	f.mustPut(alice, "user/alice", "intents/front-door", docN(1))
	root := filepath.Join(f.dir, statestore.StoreDirName)
	before, idx := wholeImage(t, f.s)
	files := dirHashes(t, root)
	checkRefusal("Restore", f.s.Restore(bytes.NewReader(backup)))
	sameFiles(t, "a refused Restore", files, dirHashes(t, root))
	if after, idx2 := wholeImage(t, f.s); !reflect.DeepEqual(after, before) || idx2 != idx {
		t.Fatal("a refused Restore changed the store's state")
	}
	if _, err := f.s.Get(ctx, alice, "user/alice", "intents/secret"); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("the forbidden entry is served: %v", err)
	}

	empty := t.TempDir()
	checkRefusal("RestoreDir", statestore.RestoreDir(empty, bytes.NewReader(backup), quota.Limits{}))
	if left, _ := os.ReadDir(empty); len(left) != 0 {
		t.Fatalf("a refused RestoreDir left %v", left)
	}
}
