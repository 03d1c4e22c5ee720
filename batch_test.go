package statestore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/filetree"
	"github.com/keeppeek/statestore/internal/smalldisk"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
)

const specDocBytes = 2193

// fillStore writes n distinct 2,193-byte documents across namespaces of at
// most perNS entries, from several goroutines so group commit batches them.
func fillStore(t *testing.T, f *fixture, n, perNS int) {
	t.Helper()
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				ns := fmt.Sprintf("group/q%03d", i/perNS)
				req := statestore.PutRequest{Namespace: ns, Key: fmt.Sprintf("k%05d", i), Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(specDocBytes, i)}
				if _, err := f.s.Put(ctx, admin, req); err != nil {
					errs <- fmt.Errorf("document %d: %w", i, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestQuotaWorkload is the specification's quota workload: 2,193-byte
// documents until the byte ceiling rejects the next one without changing
// retained state; reopen; a delete lets a new write in.
func TestQuotaWorkload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		docs    int
		ceiling int64
	}{
		{"reduced", 200, 200*specDocBytes + 871},
		{"full size", 30601, 67_108_864},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.docs > 1000 && testing.Short() {
				t.Skip("full-size quota workload skipped in -short mode")
			}
			f := newFixture(t, func(o *statestore.Options) {
				o.Limits.MaxTotalBytes = tc.ceiling
				o.NoSync = tc.docs > 1000 // the bound is under test here, not the disk
			})
			fillStore(t, f, tc.docs, 1024)
			entries, bytes, _ := f.s.Usage()
			if entries != tc.docs || bytes != int64(tc.docs*specDocBytes) {
				t.Fatalf("usage %d entries / %d bytes, want %d / %d", entries, bytes, tc.docs, tc.docs*specDocBytes)
			}
			if tc.docs == 30601 && bytes != 67_107_993 {
				t.Fatalf("full store holds %d bytes, the specification's workload holds 67,107,993", bytes)
			}
			lastNS := fmt.Sprintf("group/q%03d", (tc.docs-1)/1024) // has room for entries, not bytes
			next := statestore.PutRequest{Namespace: lastNS, Key: "one-too-many", Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(specDocBytes, -1)}
			revBefore := f.s.Namespace(lastNS)
			_, err := f.s.Put(ctx, admin, next)
			se := wantCode(t, err, statestore.QuotaExceeded, quota.BoundTotalBytes)
			if !strings.Contains(se.Error(), fmt.Sprint(tc.ceiling)) {
				t.Fatalf("message %q does not name the %d-byte ceiling", se, tc.ceiling)
			}
			if e2, b2, _ := f.s.Usage(); e2 != entries || b2 != bytes || f.s.Namespace(lastNS) != revBefore {
				t.Fatal("the rejected write changed retained state")
			}
			f.reopen()
			if e2, b2, _ := f.s.Usage(); e2 != entries || b2 != bytes {
				t.Fatalf("after reopen: %d entries / %d bytes", e2, b2)
			}
			_, err = f.s.Put(ctx, admin, next)
			wantCode(t, err, statestore.QuotaExceeded, quota.BoundTotalBytes)
			if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "group/q000", Key: "k00000"}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.s.Put(ctx, admin, next); err != nil {
				t.Fatalf("write after a delete freed space: %v", err)
			}
		})
	}
}

func TestQuotaEntriesPerNamespaceDefault(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *statestore.Options) { o.NoSync = true })
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < 1024; i += 8 {
				if _, err := f.put(alice, "user/alice", fmt.Sprintf("k%04d", i), docN(i), statestore.Expect{}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	_, err := f.put(alice, "user/alice", "k1024", docN(1), statestore.Expect{})
	wantCode(t, err, statestore.QuotaExceeded, quota.BoundEntriesPerNamespace)
}

func TestQuotaNamespaceCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *statestore.Options) { o.Limits.MaxNamespaces = 3 })
	for _, ns := range []string{"group/a", "group/b", "group/c"} {
		f.mustPut(admin, ns, "k", docN(1))
	}
	_, err := f.put(admin, "group/d", "k", docN(1), statestore.Expect{})
	se := wantCode(t, err, statestore.QuotaExceeded, quota.BoundNamespaces)
	if !strings.Contains(se.Error(), "limit 3") {
		t.Fatalf("message %q does not name the limit", se)
	}
	f.mustPut(admin, "group/a", "k2", docN(2)) // an existing namespace still takes entries
	// Emptying a namespace frees its slot (its revision counter lives on).
	f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: "group/b", Key: "k"})
	f.mustPut(admin, "group/d", "k", docN(1))
	if f.s.Namespace("group/b").Revision != 2 {
		t.Fatal("emptied namespace lost its revision counter")
	}
}

// TestScenario7Rejections: values over the bounds, disallowed schemas and
// forbidden content are rejected with the right code, naming the field.
func TestScenario7Rejections(t *testing.T) {
	t.Parallel()
	eachStoreHome(t, func(t *testing.T, h home) {
		f := h.open(t)
		big := `{"role":"subscribe","desired":true,"source_id":"cam","media_kind":"video","parameters":{"transcoder.note":"` + strings.Repeat("word ", 3400) + `"}}`
		jpeg := "data:image/jpeg;base64,/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4RDgsLEBYQERMUFRUVDA8XGBYUGBIUFRT/2wBDAQMEBAUEBQkFBQkUDQsNFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBT/wAARCAABAAEDASIAAhEBAxEB"
		const pub = `"role":"publish","desired":true,"source_id":"front-door","media_kind":"video"`
		tests := []struct {
			name   string
			schema string
			doc    string
			code   statestore.Code
			field  string
		}{
			{"document over 16 KiB", schema.MediaIntentV1, big, statestore.ValueTooLarge, "document"},
			{"unregistered schema", "keeppeek.cookies.v1", `{}`, statestore.SchemaInvalid, "schema"},
			{"not JSON", schema.MediaIntentV1, `role=publish`, statestore.SchemaInvalid, "$"},
			{"array document", schema.MediaIntentV1, `[1,2]`, statestore.SchemaInvalid, "$"},
			{"missing role", schema.MediaIntentV1, `{"desired":true,"source_id":"a","media_kind":"video"}`, statestore.SchemaInvalid, "$.role"},
			{"missing desired", schema.MediaIntentV1, `{"role":"subscribe","source_id":"a","media_kind":"video"}`, statestore.SchemaInvalid, "$.desired"},
			{"missing source_id", schema.MediaIntentV1, `{"role":"subscribe","desired":true,"media_kind":"video"}`, statestore.SchemaInvalid, "$.source_id"},
			{"missing media_kind", schema.MediaIntentV1, `{"role":"subscribe","desired":true,"source_id":"a"}`, statestore.SchemaInvalid, "$.media_kind"},
			{"publish without recording_mode", schema.MediaIntentV1, `{` + pub + `}`, statestore.SchemaInvalid, "$.recording_mode"},
			{"unknown recording_mode", schema.MediaIntentV1, `{` + pub + `,"recording_mode":"sometimes"}`, statestore.SchemaInvalid, "$.recording_mode"},
			{"source-session ID", schema.MediaIntentV1, `{` + pub + `,"recording_mode":"inherit","source_session_id":"s-8812"}`, statestore.SchemaInvalid, "$.source_session_id"},
			{"RTP MID", schema.MediaIntentV1, `{` + pub + `,"recording_mode":"inherit","rtp_mid":"0"}`, statestore.SchemaInvalid, "$.rtp_mid"},
			{"password field", schema.MediaIntentV1, `{` + pub + `,"recording_mode":"inherit","parameters":{"camera.password":"hunter2"}}`, statestore.SchemaInvalid, "$.parameters[\"camera.password\"]"},
			{"cookie", schema.MediaIntentV1, `{` + pub + `,"recording_mode":"inherit","parameters":{"web.cookie":"sid=abc"}}`, statestore.SchemaInvalid, "$.parameters[\"web.cookie\"]"},
			{"PEM block", schema.MediaIntentV1, `{` + pub + `,"recording_mode":"inherit","parameters":{"tls.cert":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"}}`, statestore.SchemaInvalid, "$.parameters[\"tls.cert\"]"},
			{"raw SDP", schema.MediaIntentV1, `{` + pub + `,"recording_mode":"inherit","parameters":{"webrtc.offer":"v=0\r\no=- 46117 2 IN IP4 127.0.0.1\r\ns=-\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:0\r\n"}}`, statestore.SchemaInvalid, "$.parameters[\"webrtc.offer\"]"},
			{"base64 JPEG", schema.MediaIntentV1, `{` + pub + `,"recording_mode":"inherit","parameters":{"ui.thumbnail":"` + jpeg + `"}}`, statestore.SchemaInvalid, "$.parameters[\"ui.thumbnail\"]"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := f.s.Put(ctx, admin, statestore.PutRequest{Namespace: "service/s1", Key: "intent", Schema: tc.schema, Document: []byte(tc.doc)})
				se := wantCode(t, err, tc.code, tc.field)
				if !strings.Contains(se.Error(), tc.field) {
					t.Fatalf("message %q does not name %q", se, tc.field)
				}
				// The JSON path is the Field; the message must not say it again.
				if strings.HasPrefix(tc.field, "$") && strings.Count(se.Error(), tc.field) != 1 {
					t.Fatalf("message %q names %q more than once", se, tc.field)
				}
				if tc.code == statestore.SchemaInvalid && !strings.Contains(se.Error(), tc.schema) {
					t.Fatalf("message %q does not name the schema %q", se, tc.schema)
				}
			})
		}
		if n, _, _ := f.s.Usage(); n != 0 {
			t.Fatalf("%d rejected documents were stored", n)
		}
		// The specification's own example is accepted.
		f.mustPut(admin, "service/s1", "intent", intentDoc(t))
	})
}

// fullDiskReserve is the reserve the full-disk tests give their store: a
// small one, so a 1 MiB tmpfs holds it beside the journal.
const fullDiskReserve = 64 << 10

// newFullDiskFixture opens a store on a fresh 1 MiB tmpfs, with no
// background checkpoint (so only the test decides what reaches the disk).
func newFullDiskFixture(t *testing.T) (*fixture, string) {
	mnt := smalldisk.Mount(t, 1<<20)
	// No pre-writing: these tests count the disk's space to the page and
	// compare the journal's bytes, and the pre-writer's background zeros
	// change both. (Pre-written zeros are space a delete or an EXPIRE can
	// use without allocating, so they only add to the reserve; a failed
	// pre-write stops pre-writing for that segment, see journal/prewrite.go.)
	f := newFixture(t, func(o *statestore.Options) {
		o.Dir, o.CheckpointBytes, o.ReserveBytes, o.NoPrewrite = mnt, -1, fullDiskReserve, true
	})
	f.dir = mnt
	return f, mnt
}

func reservePath(dir string) string {
	return filepath.Join(dir, statestore.StoreDirName, "journal", journal.ReserveFile)
}

// requireReserve fails t unless the reserve file is whole (want) or gone.
func requireReserve(t *testing.T, dir string, want bool) {
	t.Helper()
	fi, err := os.Stat(reservePath(dir))
	switch {
	case want && (err != nil || fi.Size() != fullDiskReserve || fi.Sys().(*syscall.Stat_t).Blocks*512 < fullDiskReserve):
		t.Fatalf("reserve should be whole (%d bytes, allocated): %v %v", fullDiskReserve, fi, err)
	case !want && !errors.Is(err, os.ErrNotExist):
		t.Fatalf("reserve should be given up, stat says %v", err)
	}
}

// requireEntries fails t unless the store holds exactly want in ns, each
// with its revision and document.
func requireEntries(t *testing.T, f *fixture, ns string, want map[string]statestore.Entry) {
	t.Helper()
	for key, w := range want {
		got, err := f.s.Get(ctx, admin, ns, key)
		if err != nil || got.Revision != w.Revision || string(got.Document) != string(w.Document) {
			t.Fatalf("%s/%s: %+v %v; want revision %d, document %s", ns, key, got, err, w.Revision, w.Document)
		}
	}
	if n := f.s.Namespace(ns).Entries; n != len(want) {
		t.Fatalf("namespace %s holds %d entries, want %d", ns, n, len(want))
	}
}

// wantReserveRefusal fails t unless err is the STORAGE refusal that names
// the reserve.
func wantReserveRefusal(t *testing.T, err error) {
	t.Helper()
	se := wantCode(t, err, statestore.Storage, "journal reserve")
	if !errors.Is(err, journal.ErrOnReserve) || !strings.Contains(se.Error(), "running on its reserve; only deletes are accepted") {
		t.Fatalf("refusal does not name the reserve: %v", err)
	}
}

// TestFullDiskNeverLocksTheOperatorOut fills a tmpfs through the API and
// checks the reserve's whole contract: the write that meets the full disk
// answers STORAGE and gives the reserve up; from then on every PUT is
// refused with STORAGE naming the reserve, while every committed entry
// stays readable, a DELETE commits and frees its key, a lease lapsing
// meanwhile is EXPIREd and reaches its watcher, a checkpoint fails cleanly
// leaving the journal as it was, and the store reopens with an overdue
// lease. Once space is freed from outside, PUTs are accepted again and the
// reserve is back; nothing acknowledged is lost across a reopen.
func TestFullDiskNeverLocksTheOperatorOut(t *testing.T) {
	t.Parallel()
	f, mnt := newFullDiskFixture(t)
	const ns, leases = "group/disk", "service/leases"
	acked := map[string]statestore.Entry{}
	for i := range 10 {
		key := fmt.Sprintf("k%02d", i)
		acked[key] = f.mustPut(admin, ns, key, docN(i))
	}
	lapsing, err := f.lease(admin, leases, "lapses-while-full", statestore.CreateOnly, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.lease(admin, leases, "lapses-while-closed", statestore.CreateOnly, time.Minute); err != nil {
		t.Fatal(err)
	}
	ss, sink := f.session(admin)
	f.watch(ss, "leases", leases, "")
	requireReserve(t, mnt, true)

	filler := smalldisk.Fill(t, mnt, "filler")

	// A checkpoint on the full disk fails cleanly: STORAGE, and not one
	// byte of the journal changes.
	journalDir := filepath.Join(mnt, statestore.StoreDirName, "journal")
	before, err := filetree.Hashes(journalDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.Checkpoint(); statestore.CodeOf(err) != statestore.Storage || !journal.IsNoSpace(err) {
		t.Fatalf("checkpoint on a full disk: %v; want STORAGE wrapping ENOSPC", err)
	}
	after, err := filetree.Hashes(journalDir)
	if err != nil {
		t.Fatal(err)
	}
	if d := filetree.Diff(before, after); len(d) > 0 {
		t.Fatalf("a failed checkpoint changed the journal: %v", d)
	}

	// Fill through the API: PUTs land in the tail page's slack until one
	// needs a page the disk no longer has.
	var failed error
	for i := 0; i < 10_000 && failed == nil; i++ {
		key := fmt.Sprintf("fill%04d", i)
		e, err := f.put(admin, ns, key, docN(i), statestore.Expect{})
		if err == nil {
			acked[key] = e
		}
		failed = err
	}
	wantCode(t, failed, statestore.Storage, "journal")
	if !journal.IsNoSpace(failed) {
		t.Fatalf("the write that met the full disk: %v; want ENOSPC", failed)
	}
	requireReserve(t, mnt, false)
	if st := f.s.Stats().JournalReserve; !st.Spent || st.Releases != 1 {
		t.Fatalf("reserve state after the full disk: %+v", st)
	}

	// Every PUT is refused now, a replacement and a new key alike.
	_, err = f.put(admin, ns, "k01", docN(1), statestore.Expect{})
	wantReserveRefusal(t, err)
	_, err = f.put(admin, ns, "new", docN(1), statestore.Expect{})
	wantReserveRefusal(t, err)
	requireEntries(t, f, ns, acked)

	// DELETE is admitted and frees the key.
	if _, err := f.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: "k00"}); err != nil {
		t.Fatalf("delete on a full disk: %v", err)
	}
	delete(acked, "k00")
	if _, err := f.s.Get(ctx, admin, ns, "k00"); statestore.CodeOf(err) != statestore.NotFound {
		t.Fatalf("deleted key reads %v, want NOT_FOUND", err)
	}

	// A lease lapsing on the full disk is EXPIREd and reaches its watcher.
	f.clock.Advance(10 * time.Second)
	u := sink.nextUpdate(t)
	if u.Kind != watch.Expire || u.Key != "lapses-while-full" || u.Revision != lapsing.Revision+2 {
		t.Fatalf("watch update %+v; want EXPIRE of lapses-while-full at revision %d", u, lapsing.Revision+2)
	}
	requireEntries(t, f, ns, acked)

	// The other lease lapses while the store is down; on the still full
	// disk the restart purge commits its EXPIRE and the store opens.
	f.s.Close()
	f.s = nil
	f.clock.Advance(time.Minute)
	f.open()
	if got := f.s.OpenReport().Expired; got != 1 {
		t.Fatalf("restart purge expired %d leases, want 1", got)
	}
	if _, err := f.s.Get(ctx, admin, leases, "lapses-while-closed"); statestore.CodeOf(err) != statestore.NotFound {
		t.Fatalf("overdue lease reads %v after reopen, want NOT_FOUND", err)
	}
	requireEntries(t, f, ns, acked)
	_, err = f.put(admin, ns, "new", docN(1), statestore.Expect{})
	wantReserveRefusal(t, err)

	// Space appears from outside: the next PUT restores the reserve and
	// is accepted.
	filler.Remove(t)
	e, err := f.put(admin, ns, "new", docN(2), statestore.Expect{})
	if err != nil {
		t.Fatalf("put once space is free: %v", err)
	}
	acked["new"] = e
	requireReserve(t, mnt, true)
	if st := f.s.Stats().JournalReserve; st.Spent || st.Restores != 1 {
		t.Fatalf("reserve state after space came back: %+v", st)
	}
	f.reopen()
	requireEntries(t, f, ns, acked)
	requireReserve(t, mnt, true)
}
