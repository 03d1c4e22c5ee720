package inspector_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/ops/inspector"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/watch"
	"github.com/keeppeek/statestore/wire/webclient"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// The browser tests drive Debian's chromium through chromedp. Without
// chromium they skip, except in CI (CI=true), where that is a failure.
// A failing test saves a screenshot of the page under testdata/out/.

var (
	ctx   = context.Background()
	admin = statestore.Principal{ID: "inspector", Admin: true}
)

const token = "browser-test-token"

// pageGuard bounds every wait for the page: far longer than anything takes,
// so only a real failure trips it.
const pageGuard = 30 * time.Second

func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed, and CI=true: the browser tests must run in CI (.ci/run installs Debian's chromium)")
	}
	t.Skip("chromium is not installed: skipping the browser tests (apt-get install chromium; in CI they are required)")
	return ""
}

// browserEnv is a store, the inspector serving it over HTTP on 127.0.0.1,
// and one headless chromium tab.
type browserEnv struct {
	t     *testing.T
	store *statestore.Store
	cur   atomic.Pointer[inspector.Server] // swapped by the reconnect test
	srv   *httptest.Server
	ended chan error // one per WebSocket session that ended
	tab   context.Context
	close context.CancelFunc // closes the tab

	mu      sync.Mutex
	console []string
}

func newBrowserEnv(t *testing.T, limits quota.Limits) *browserEnv {
	t.Helper()
	exe := chromium(t)
	b := &browserEnv{t: t, ended: make(chan error, 16)}
	s, err := statestore.Open(statestore.Options{Dir: t.TempDir(), Limits: limits, CheckpointBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	b.store = s
	b.cur.Store(b.newInspector(s, nil))
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.cur.Load().ServeHTTP(w, r) }))
	t.Cleanup(func() {
		b.srv.Close()
		b.cur.Load().Close()
		s.Close()
	})
	b.startBrowser(exe)
	return b
}

func (b *browserEnv) newInspector(s *statestore.Store, cause error) *inspector.Server {
	ins, err := inspector.New(inspector.Config{Store: s, Cause: cause,
		Auth:      wstransport.TokenAuthenticator{Token: token, Principal: admin},
		Transport: wstransport.Options{Ended: func(_ statestore.Principal, err error) { b.ended <- err }}})
	if err != nil {
		b.t.Fatal(err)
	}
	return ins
}

func (b *browserEnv) startBrowser(exe string) {
	t := b.t
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	b.tab, b.close = chromedp.NewContext(bctx)
	t.Cleanup(b.close)
	messages := chromedp.Console(b.tab)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, fmt.Sprintf("%s: %s", m.Type, m.Text))
			b.mu.Unlock()
		}
	}()
	t.Cleanup(b.saveOnFailure)
}

// saveOnFailure keeps a screenshot and the console of a failed test.
func (b *browserEnv) saveOnFailure() {
	if !b.t.Failed() {
		return
	}
	b.mu.Lock()
	for _, l := range b.console {
		b.t.Logf("console %s", l)
	}
	b.mu.Unlock()
	sctx, cancel := context.WithTimeout(b.tab, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("no screenshot: %v", err)
		return
	}
	dir := filepath.Join("testdata", "out")
	path := filepath.Join(dir, strings.ReplaceAll(b.t.Name(), "/", "_")+".png")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		err = os.WriteFile(path, png, 0o644)
		if err == nil {
			b.t.Logf("screenshot of the failed page: %s", path)
			return
		}
	}
	b.t.Logf("could not save the screenshot: %v", err)
}

// open loads the inspector with the token and the fragment's extra
// parameters (watch=NAMESPACE|PREFIX ...).
func (b *browserEnv) open(fragment string) {
	b.t.Helper()
	u := b.srv.URL + "/#token=" + token
	if fragment != "" {
		u += "&" + fragment
	}
	if err := chromedp.Do(b.tab, chromedp.Navigate(u)); err != nil {
		b.t.Fatalf("navigate: %v", err)
	}
}

// until waits until the JavaScript predicate is truthy in the page.
func (b *browserEnv) until(what, predicate string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.tab, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingTimeout(pageGuard))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v", what, predicate, err)
	}
}

// eval evaluates expr in the page (awaiting a promise) and decodes its JSON
// value into T. BigInts must be converted by expr: JSON has none.
func eval[T any](b *browserEnv, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.tab, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (b *browserEnv) put(ns, key string, seed int) statestore.Entry {
	b.t.Helper()
	e, err := b.store.Put(ctx, admin, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: testdoc.MediaIntent(300, seed)})
	if err != nil {
		b.t.Fatal(err)
	}
	return e
}

func (b *browserEnv) waitEnded() error {
	b.t.Helper()
	select {
	case err := <-b.ended:
		return err
	case <-time.After(pageGuard):
		b.t.Fatal("no WebSocket session ended")
		return nil
	}
}

const firstWatch = "kpInspector.panels[0].watch"

func TestBrowserUpdatesAreAppliedInOrder(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t, quota.Limits{})
	const ns = "service/transcoder-a"
	b.put(ns, "intents/k0", 0) // in the snapshot
	b.open("watch=" + ns)
	b.until("the snapshot", firstWatch+`?.status === "live" && `+firstWatch+`.snapshots === 1`)
	if n := eval[int](b, firstWatch+".entries.size"); n != 1 {
		t.Fatalf("snapshot installed %d entries, want 1", n)
	}
	// More updates than the unacknowledged bound (32): the page must
	// acknowledge as it applies, or the store would close the watch. The
	// writer stays within the bound, as the specification requires of a
	// watcher's pace: each batch of 20 waits for its acknowledgement.
	const writes, batch = 80, 20
	var want [][2]int
	for i := range writes {
		e := b.put(ns, fmt.Sprintf("intents/k%d", i%5), i)
		want = append(want, [2]int{i + 1, int(e.Revision)})
		if (i+1)%batch == 0 {
			b.until("the batch acknowledged", fmt.Sprintf("kpInspector.panels[0].events.some(e => e.type === 'acked' && e.sequence >= %dn)", i+1))
		}
	}
	rev, err := b.store.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: "intents/k4"})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, [2]int{writes + 1, int(rev)})
	b.until("every update applied", fmt.Sprintf("%s.applied === %dn", firstWatch, writes+1))
	got := eval[[][2]int](b, `kpInspector.panels[0].events.filter(e => e.type === "update").map(e => [Number(e.update.watchSequence), Number(e.update.revision)])`)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the page applied (sequence, revision) %v\nwant %v", got, want)
	}
	if other := eval[[]string](b, `kpInspector.panels[0].events.filter(e => !["snapshot", "update", "acked"].includes(e.type)).map(e => e.type)`); len(other) != 0 {
		t.Fatalf("the watch also saw %v: a gap, closure or resync where none should be", other)
	}
	// The table shows every key at the store's revision, and no deleted one.
	rows := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("section.watch tbody tr")].map(r => [r.dataset.key, r.dataset.revision]))`)
	wantRows := map[string]string{}
	for i := range 4 {
		key := fmt.Sprintf("intents/k%d", i)
		e, err := b.store.Get(ctx, admin, ns, key)
		if err != nil {
			t.Fatal(err)
		}
		wantRows[key] = fmt.Sprint(e.Revision)
	}
	if fmt.Sprint(rows) != fmt.Sprint(wantRows) {
		t.Fatalf("the page's table shows %v, want %v", rows, wantRows)
	}
	b.until("the last acknowledgement", fmt.Sprintf("kpInspector.panels[0].events.some(e => e.type === 'acked' && e.sequence === %dn)", writes+1))
	if st := b.store.Stats().Watches; st.Closed[watch.BufferOverflow] != 0 || st.Closed[watch.AckTimeout] != 0 {
		t.Fatalf("the store closed watches: %v", st.Closed)
	}
}

func TestBrowserAckTimeoutIsShown(t *testing.T) {
	t.Parallel()
	// The store runs on the real clock here, with a short ack deadline.
	b := newBrowserEnv(t, quota.Limits{AckDeadline: 500 * time.Millisecond})
	const ns = "service/recorder"
	b.open("watch=" + ns)
	b.until("the snapshot", firstWatch+`?.status === "live"`)
	eval[bool](b, firstWatch+".pauseAcks = true")
	b.put(ns, "intents/k", 1)
	b.until("the update applied", firstWatch+".entries.has('intents/k')")
	b.until("the closure shown", `document.querySelector("section.watch .close-reason")?.textContent === "ACK_TIMEOUT"`)
	// The client rule: a closure means a new snapshot, which holds the entry.
	b.until("a new snapshot", firstWatch+`.snapshots === 2 && `+firstWatch+`.status === "live"`)
	if !eval[bool](b, firstWatch+".entries.has('intents/k')") {
		t.Fatal("the new snapshot lost the entry")
	}
	if n := b.store.Stats().Watches.Closed[watch.AckTimeout]; n != 1 {
		t.Fatalf("the store counts %d ACK_TIMEOUT closures, want 1", n)
	}
	log := eval[string](b, `document.querySelector("section.watch .log").textContent`)
	if !strings.Contains(log, "closed by the server: ACK_TIMEOUT") {
		t.Fatalf("the event log does not show the closure: %q", log)
	}
}

// TestBrowserUnavailableClosureIsShown: a node that lost its cluster's
// leader closes its watches UNAVAILABLE (Store.CloseWatches); the page
// shows the reason and, after the reconnect delay, a new snapshot holding
// what was written meanwhile.
func TestBrowserUnavailableClosureIsShown(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t, quota.Limits{})
	const ns = "service/recorder"
	b.open("watch=" + ns)
	b.until("the snapshot", firstWatch+`?.status === "live"`)
	if n, err := b.store.CloseWatches(watch.Unavailable); err != nil || n != 1 {
		t.Fatalf("CloseWatches = %d, %v; want the page's watch closed", n, err)
	}
	b.put(ns, "intents/k", 1)
	b.until("the closure shown", `document.querySelector("section.watch .close-reason")?.textContent === "UNAVAILABLE"`)
	b.until("a new snapshot", firstWatch+`.snapshots === 2 && `+firstWatch+`.status === "live"`)
	if !eval[bool](b, firstWatch+".entries.has('intents/k')") {
		t.Fatal("the new snapshot lacks the entry written after the closure")
	}
	log := eval[string](b, `document.querySelector("section.watch .log").textContent`)
	if !strings.Contains(log, "closed by the server: UNAVAILABLE") {
		t.Fatalf("the event log does not show the closure: %q", log)
	}
}

func TestBrowserClosingTheTabRemovesItsWatches(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t, quota.Limits{})
	b.open("watch=service/a&watch=service/b&watch=service/a|intents/")
	b.until("three live watches", `kpInspector.panels.length === 3 && kpInspector.panels.every(p => p.watch.status === "live")`)
	if n := b.store.Stats().Watches.Open; n != 3 {
		t.Fatalf("%d watches open on the server, want 3", n)
	}
	b.close()
	b.waitEnded()
	st := b.store.Stats().Watches
	if st.Open != 0 || st.Sessions != 0 || st.Disconnected != 3 {
		t.Fatalf("after the tab closed: %d watches and %d sessions open, %d removed by disconnect; want 0, 0, 3", st.Open, st.Sessions, st.Disconnected)
	}
}

func TestBrowserReconnectTakesANewSnapshot(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t, quota.Limits{})
	const ns = "service/transcoder-b"
	b.put(ns, "intents/a", 1)
	b.open("watch=" + ns)
	b.until("the snapshot", firstWatch+`?.status === "live"`)
	// The server goes away; while the page is disconnected the namespace
	// changes, and the page cannot hear of it.
	old := b.cur.Load()
	old.Close()
	b.until("the page to notice the disconnect", `kpInspector.client.connection !== "open" && `+firstWatch+`.status === "resyncing"`)
	if _, err := b.store.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: "intents/a"}); err != nil {
		t.Fatal(err)
	}
	eb := b.put(ns, "intents/b", 2)
	b.cur.Store(b.newInspector(b.store, nil))
	b.until("a new snapshot after the reconnect", firstWatch+`.snapshots === 2 && `+firstWatch+`.status === "live"`)
	if got := eval[string](b, firstWatch+".snapshotRevision.toString()"); got != fmt.Sprint(eb.Revision) {
		t.Fatalf("new snapshot at revision %s, want %d", got, eb.Revision)
	}
	if keys := eval[[]string](b, `[...`+firstWatch+`.entries.keys()]`); fmt.Sprint(keys) != "[intents/b]" {
		t.Fatalf("after the reconnect the page holds %v, want [intents/b] (from the snapshot)", keys)
	}
	if n := eval[int](b, `kpInspector.panels[0].events.filter(e => e.type === "update").length`); n != 0 {
		t.Fatalf("the page applied %d updates; the changes must come from the new snapshot only", n)
	}
	rows := eval[[]string](b, `[...document.querySelectorAll("section.watch tbody tr")].map(r => r.dataset.key)`)
	if fmt.Sprint(rows) != "[intents/b]" {
		t.Fatalf("the table shows %v, want [intents/b]", rows)
	}
}

func TestBrowserWatchLimitIsShownAsAnError(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t, quota.Limits{})
	b.open("")
	b.until("the connection", `kpInspector.client.connection === "open"`)
	limit := b.store.Limits().MaxWatchesPerSession
	eval[bool](b, fmt.Sprintf(`{ for (let i = 0; i <= %d; i++) kpInspector.watch("service/a", "p" + i + "/"); true }`, limit))
	b.until("every answer", fmt.Sprintf(`kpInspector.panels.filter(p => p.watch.status === "live").length === %d && kpInspector.panels.filter(p => p.watch.status === "failed").length === 1`, limit))
	errs := eval[[]string](b, `[...document.querySelectorAll("section.watch .watch-error")].map(e => e.textContent)`)
	if fmt.Sprint(errs) != "[WATCH_LIMIT]" {
		t.Fatalf("the page shows errors %v, want one WATCH_LIMIT", errs)
	}
	if msg := eval[string](b, `kpInspector.panels.find(p => p.watch.status === "failed").watch.error.message`); !strings.Contains(msg, fmt.Sprint(limit)) {
		t.Fatalf("the error %q does not name the bound %d", msg, limit)
	}
	if n := b.store.Stats().Watches.Open; n != limit {
		t.Fatalf("%d watches open on the server, want %d", n, limit)
	}
}

func TestBrowserUnavailableStoreSaysWhy(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t, quota.Limits{})
	cause := errors.New("journal record 7 fails its checksum")
	b.cur.Load().Close()
	b.cur.Store(b.newInspector(nil, cause))
	b.open("watch=service/a")
	b.until("the banner", `document.getElementById("unavailable").textContent.includes("journal record 7 fails its checksum")`)
	if c := eval[string](b, `document.getElementById("capability").textContent`); c != "no capability advertised" {
		t.Fatalf("capability shown as %q", c)
	}
	msg := eval[string](b, `kpInspector.client.get("service/a", "k").then(() => "answered", e => e.message)`)
	if !strings.HasPrefix(msg, "UNAVAILABLE") || !strings.Contains(msg, cause.Error()) {
		t.Fatalf("get answered %q, want UNAVAILABLE naming the cause", msg)
	}
	b.until("the refused watch", `document.querySelector("section.watch .watch-error")?.textContent === "UNAVAILABLE"`)
}

// TestBrowserClientMovesToTheNextURL: the client library (keeppeek.mjs)
// given two servers' URLs leaves the one that closes its watch UNAVAILABLE
// for the next, and leaves the next when it stops mid-watch, each time
// re-snapshotting there: the writes made meanwhile arrive in the new
// snapshots, never as updates invented across the move. Both servers serve
// the one store, as two nodes of a cluster serve one state. The page is a
// third server's (the inspector page allows connections to its own origin
// only), which the two admit as an origin.
func TestBrowserClientMovesToTheNextURL(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t, quota.Limits{})
	const ns = "service/transcoder-c"
	b.put(ns, "intents/a", 1)
	server := func() (*httptest.Server, func()) {
		ins, err := inspector.New(inspector.Config{Store: b.store, NoPage: true,
			Auth:      wstransport.TokenAuthenticator{Token: token, Principal: admin},
			Transport: wstransport.Options{OriginPatterns: []string{"127.0.0.1:*"}}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(ins)
		stop := sync.OnceFunc(func() {
			ins.Close()
			srv.Close()
		})
		t.Cleanup(stop)
		return srv, stop
	}
	srvA, _ := server()
	srvB, stopB := server()
	page := httptest.NewServer(http.FileServerFS(fstest.MapFS{
		"index.html":   {Data: []byte("<!doctype html><title>two servers</title>")},
		"keeppeek.mjs": {Data: must(fs.ReadFile(webclient.Assets(), "keeppeek.mjs"))},
	}))
	t.Cleanup(page.Close)
	wsURL := func(base string) string { return "ws" + strings.TrimPrefix(base, "http") + "/ws?access_token=" + token }
	urlA, urlB := wsURL(srvA.URL), wsURL(srvB.URL)
	if err := chromedp.Do(b.tab, chromedp.Navigate(page.URL+"/index.html")); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	eval[bool](b, fmt.Sprintf(`(async () => {
		const m = await import("/keeppeek.mjs");
		const c = new m.StateStoreClient({ url: [%q, %q], reconnectDelayMs: 50 });
		const multi = { c, events: [] };
		window.multi = multi;
		c.connect();
		multi.w = c.watch({ namespace: %q }, (w, e) => multi.events.push(e.type === "closed" ? "closed " + m.closeReasonName(e.reason) : e.type));
		return true;
	})()`, urlA, urlB, ns))
	b.until("the snapshot at the first URL", `multi.w.status === "live" && multi.w.snapshots === 1 && multi.c.url === `+fmt.Sprintf("%q", urlA))

	// The first server's node loses its leader: the watch is closed
	// UNAVAILABLE there, and the client moves on while that server stays up.
	if n, err := b.store.CloseWatches(watch.Unavailable); err != nil || n != 1 {
		t.Fatalf("CloseWatches = %d, %v; want the client's watch closed", n, err)
	}
	b.put(ns, "intents/b", 2)
	b.until("a new snapshot at the second URL", `multi.w.status === "live" && multi.w.snapshots === 2 && multi.c.url === `+fmt.Sprintf("%q", urlB)+
		` && multi.w.entries.has("intents/b")`)

	// The second server stops mid-watch: back to the first, which has its
	// leader again, with a new snapshot holding what was written meanwhile.
	stopB()
	if _, err := b.store.Delete(ctx, admin, statestore.DeleteRequest{Namespace: ns, Key: "intents/a"}); err != nil {
		t.Fatal(err)
	}
	ec := b.put(ns, "intents/c", 3)
	b.until("a new snapshot back at the first URL", `multi.w.status === "live" && multi.w.snapshots === 3 && multi.c.url === `+fmt.Sprintf("%q", urlA)+
		` && multi.w.entries.has("intents/c") && !multi.w.entries.has("intents/a")`)
	got := eval[map[string]string](b, `Object.fromEntries([...multi.w.entries].map(([k, e]) => [k, e.revision.toString()]))`)
	if want := fmt.Sprintf("map[intents/b:2 intents/c:%d]", ec.Revision); fmt.Sprint(got) != want {
		t.Fatalf("after the moves the client holds %v, want %s", got, want)
	}
	// Across each move nothing is applied but a new snapshot: after a
	// closure or a resync, the next event that changes the cache is one.
	// (The client may come back to the first server before the writes, and
	// then apply them as updates to that snapshot.)
	events := eval[[]string](b, `multi.events`)
	waiting := false
	for _, e := range events {
		switch e {
		case "closed UNAVAILABLE", "resync":
			waiting = true
		case "snapshot":
			waiting = false
		case "update":
			if waiting {
				t.Fatalf("events %v: an update applied across a move, before the new snapshot", events)
			}
		}
	}
	if !slices.Contains(events, "closed UNAVAILABLE") || strings.Count(strings.Join(events, ","), "snapshot") != 3 {
		t.Fatalf("events %v: want the UNAVAILABLE closure and three snapshots", events)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
