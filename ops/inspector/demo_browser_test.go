package inspector_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
)

func intent(source string, priority int) []byte {
	return fmt.Appendf(nil, `{"role":"publish","desired":true,"source_id":%q,"media_kind":"video","variant_id":"browser-h264-720p","priority":%d,"recording_mode":"disabled"}`, source, priority)
}

// TestBrowserInspectorDuringTheDemo plays the demo's coordination story
// against the page: two coordinators compare-and-set one intent (one gets
// CONFLICT and retries), a worker claims and renews a lease while the page
// watches, and a third watch that stops acknowledging is closed with
// BUFFER_OVERFLOW. The page must show the entries at their revisions, the
// live updates and the close reason. With KP_SCREENSHOT=FILE it also saves
// the page as the README's screenshot:
//
//	KP_SCREENSHOT=$PWD/docs/inspector.png go test -run TestBrowserInspectorDuringTheDemo ./inspector/
func TestBrowserInspectorDuringTheDemo(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t, quota.Limits{})
	const ns = "service/transcoder-a"
	a := statestore.Principal{ID: "coordinator-a", Admin: true}
	c := statestore.Principal{ID: "coordinator-b", Admin: true}
	w := statestore.Principal{ID: "transcoder-worker-1", Admin: true}
	put := func(p statestore.Principal, key string, doc []byte, x statestore.Expect, ttl time.Duration) (statestore.Entry, error) {
		return b.store.Put(ctx, p, statestore.PutRequest{Namespace: ns, Key: key, Schema: schema.MediaIntentV1, Document: doc, Expect: x, TTL: ttl})
	}
	base, err := put(a, "intents/front-door-video", intent("front-door", 10), statestore.CreateOnly, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put(a, "intents/front-door-video", intent("front-door", 50), statestore.IfRevision(base.Revision), 0); err != nil {
		t.Fatal(err)
	}
	_, err = put(c, "intents/front-door-video", intent("front-door", 90), statestore.IfRevision(base.Revision), 0)
	var se *statestore.Error
	if !errors.As(err, &se) || se.Code != statestore.Conflict {
		t.Fatalf("the second writer got %v, want CONFLICT", err)
	}
	if _, err := put(c, "intents/front-door-video", intent("front-door", 90), statestore.IfRevision(se.CurrentRevision), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := put(c, "intents/back-yard-audio", intent("back-yard", 20), statestore.CreateOnly, 0); err != nil {
		t.Fatal(err)
	}

	b.open("watch=" + ns + "|intents/&watch=" + ns + "|leases/&watch=" + ns)
	b.until("three live watches", `kpInspector.panels.length === 3 && kpInspector.panels.every(p => p.watch.status === "live")`)
	eval[bool](b, "kpInspector.panels[2].watch.pauseAcks = true")

	// The worker claims the lease and renews it with compare-and-set.
	lease, err := put(w, "leases/front-door-video-browser-h264-720p", intent("front-door", 100), statestore.CreateOnly, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range b.store.Limits().MaxUnackedUpdates {
		if lease, err = put(w, "leases/front-door-video-browser-h264-720p", intent("front-door", 100), statestore.IfRevision(lease.Revision), 30*time.Second); err != nil {
			t.Fatal(err)
		}
		// Paced below the bound for the two acknowledging watches.
		b.until("the renewal applied", fmt.Sprintf("kpInspector.panels[1].watch.entries.get('leases/front-door-video-browser-h264-720p')?.revision === %dn && kpInspector.panels[1].events.some(e => e.type === 'acked' && e.sequence === kpInspector.panels[1].watch.applied)", lease.Revision))
	}
	b.until("the overflow shown", `document.querySelectorAll("section.watch .close-reason")[0]?.textContent === "BUFFER_OVERFLOW"`)
	b.until("the non-acknowledging watch's new snapshot", `kpInspector.panels[2].watch.snapshots === 2 && kpInspector.panels[2].watch.status === "live"`)

	rows := eval[[]string](b, `[...document.querySelectorAll("section.watch")[1].querySelectorAll("tbody tr")].map(r => r.dataset.key + "@" + r.dataset.revision)`)
	if want := fmt.Sprintf("[leases/front-door-video-browser-h264-720p@%d]", lease.Revision); fmt.Sprint(rows) != want {
		t.Fatalf("the leases panel shows %v, want %s", rows, want)
	}
	owners := eval[string](b, `document.querySelectorAll("section.watch")[0].textContent`)
	for _, s := range []string{"coordinator-b", "intents/front-door-video", "intents/back-yard-audio"} {
		if !strings.Contains(owners, s) {
			t.Fatalf("the intents panel does not show %q: %q", s, owners)
		}
	}
	// The namespace list refreshes on its own every 2 s; take it now.
	eval[bool](b, "kpInspector.refreshInfo().then(() => true)")
	if got := eval[string](b, `document.querySelector("#namespaces tr td:nth-child(2)").textContent`); got != fmt.Sprint(lease.Revision) {
		t.Fatalf("the namespace list shows revision %s, want %d", got, lease.Revision)
	}
	if path := os.Getenv("KP_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(b.tab, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot saved to %s", path)
	}
}
