package workerproc_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/cliflag"
	"github.com/keeppeek/statestore/internal/testtls"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/grouppref"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
	"github.com/keeppeek/statestore/worker/stateclient"
)

var ctx = context.Background()

const (
	serviceNS  = "service/transcoder-a"
	publishKey = "intents/front-door-video-720p"
	out720     = "browser-h264-720p"
	leaseKey   = "leases/front-door-video-" + out720
	frontDoor  = "front-door"
	aliceNS    = "user/alice"
	mainSub    = "subscriptions/front-door-main"
	extraSub   = "subscriptions/front-door-sub"
	// leaseTTL is short so the standby's wait costs the test little.
	leaseTTL = 2 * time.Second
)

// TestWorkerProcessesAgainstKpstate runs the specification's scenarios 4,
// 5 and 6 with every participant its own OS process: kpstate serve (TLS
// on loopback, a principal per worker: the transcoders administrators, as
// service/ needs, the viewer and the group client not), two transcoders
// (kpworker --role transcoder, one active, one standing by), a viewer and
// a group client, all through client/. The media server's stand-in is a
// mediasim.Server in this process, served over loopback HTTP by its
// Handler behind a recorder that reads the lease at every
// StartPublication. The story: the viewer subscribes only once its
// variant is ready; the group client joins per its preferences only; the
// server is killed and restarted on the same address and data, with
// intents changed while it was down, and every worker reconnects,
// re-snapshots and reconciles without repeating a command; the active
// transcoder is killed and the standby publishes only after the lease
// expired, never two owners of the output at once; a transcoder stopped
// by SIGTERM stops its publication and releases its lease, so the other
// takes over at once; one whose lease an administrator takes away issues
// StopPublication.
func TestWorkerProcessesAgainstKpstate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testtls.New(t, "workerproc test CA")
	tlsFiles := ca.WriteFiles(t, dir)
	ops := newPrincipal(t, dir, "ops", true)
	tr1 := newPrincipal(t, dir, "transcoder-1", true)
	tr2 := newPrincipal(t, dir, "transcoder-2", true)
	alice := newPrincipal(t, dir, "alice", false)
	bob := newPrincipal(t, dir, "bob", false)
	principals := []principal{ops, tr1, tr2, alice, bob}
	dataDir, config := filepath.Join(dir, "data"), filepath.Join(dir, "kpstate.toml")
	writeConfig(t, config, dataDir, "127.0.0.1:0", tlsFiles, principals)
	srv := startServer(t, config)
	opsC := dial(t, srv, ops, ca)
	reg, err := cliflag.Registry() // the server's own registry
	if err != nil {
		t.Fatal(err)
	}

	sim := mediasim.New()
	sim.Connect(frontDoor, mediasim.SourceSpec{Streams: []intent.MediaKind{intent.Video}, Publishable: true,
		Profiles: []reconcile.Profile{{ID: out720, Codec: "h264"}},
		Variants: []reconcile.Variant{{ID: "camera-main", MediaKind: intent.Video, Codec: "h264"}, {ID: "camera-sub", MediaKind: intent.Video, Codec: "h264"}}})
	sim.AddGroup("team-red", "carol")
	sim.AddGroup("team-blue", "bob")
	sim.AddGroup("team-green", "bob")
	med := newMedia(t, sim, out720, func(ctx context.Context) (statestore.Entry, error) { return opsC.Get(ctx, serviceNS, leaseKey) })
	leases := followLease(t, opsC, serviceNS, leaseKey)

	putIntent(t, opsC, reg, serviceNS, publishKey, intent.Intent{Role: intent.Publish, Desired: true, SourceID: frontDoor,
		MediaKind: intent.Video, VariantID: out720, OutputProfile: out720, Priority: 100, RecordingMode: intent.RecordingDisabled})
	aliceC := dial(t, srv, alice, ca)
	putIntent(t, aliceC, reg, aliceNS, mainSub, subscribe("camera-main"))

	common := func(p principal) []string {
		return []string{"--endpoints", srv.endpoint, "--cacert", tlsFiles.CA, "--token-file", p.tokenFile, "--media", med.url, "--max-backoff", "250ms"}
	}
	transcoder := func(p principal) *worker {
		return startWorker(t, p.id, append(common(p), "--role", "transcoder", "--namespace", serviceNS, "--holder", p.id, "--lease-ttl", leaseTTL.String())...)
	}

	// Scenario 4: the first transcoder claims the lease and publishes; the
	// second stands by.
	t1 := transcoder(tr1)
	t1.waitFor("claimed", publishKey, detail(leaseKey))
	t1.waitFor("bound", publishKey, detail("variant "+out720))
	t2 := transcoder(tr2)
	t2.waitFor("standby", publishKey, detail("held by transcoder-1"))

	// Scenario 5: the viewer waits while its variant is not ready, and
	// subscribes once it is.
	viewer := startWorker(t, "viewer", append(common(alice), "--role", "viewer", "--holder", "alice-browser")...)
	viewer.waitFor("waiting", mainSub, detail(`"camera-main" is not ready`))
	if c := med.calls("alice"); len(c) != 0 {
		t.Fatalf("the viewer sent %v before its variant was ready", c)
	}
	if err := sim.MarkReady(frontDoor, "camera-main"); err != nil {
		t.Fatal(err)
	}
	viewer.waitFor("bound", mainSub, detail("camera-main"))
	if got, want := med.calls("alice"), []string{"Subscribe camera-main"}; !slices.Equal(got, want) {
		t.Fatalf("the viewer sent %v, want %v", got, want)
	}
	wantStatus(t, opsC, reg, aliceNS, "status/alice-browser/front-door-main", "alice", reconcile.Active, "camera-main")

	// Scenario 6: the group client saves its preference and joins what it
	// names; a join that got no answer is retried once the media server
	// answers, and a group that does not admit it stays without it.
	med.dropNextJoins(1)
	group := startWorker(t, "group", append(common(bob), "--role", "group", "--prefer", "team-red")...)
	group.waitFor("preference", grouppref.Key, detail("team-red"))
	group.waitFor("command-error", grouppref.Key, detail("join team-red"))
	group.waitFor("join-refused", grouppref.Key, detail("team-red"))
	if m := sim.GroupState("team-red").Members; len(m) != 0 {
		t.Fatalf("team-red's members %v: a preference made a member", m)
	}
	if p := storedPreference(t, opsC, reg, "bob"); p.PreferredGroup != "team-red" {
		t.Fatalf("bob's stored preference %+v", p)
	}
	bobC := dial(t, srv, bob, ca)
	savePreference(t, bobC, reg, "bob", "team-blue") // bob's other device
	group.waitFor("preference", grouppref.Key, detail("team-blue"))
	group.waitFor("joined", grouppref.Key, detail("team-blue"))
	if m := sim.GroupState("team-blue").Members; !slices.Equal(m, []string{"bob"}) {
		t.Fatalf("team-blue's members %v, want bob after his join", m)
	}
	// The preference is all a client writes: group state is not its own.
	if _, err := bobC.Put(ctx, statestore.PutRequest{Namespace: "group/team-blue", Key: "members/bob", Schema: grouppref.Schema,
		Document: []byte(`{"preferred_group":"team-blue"}`)}); !errors.Is(err, statestore.ErrPermissionDenied) {
		t.Fatalf("bob wrote group/team-blue: %v", err)
	}

	// The server is killed and restarted on the same address and data.
	// The kill comes right after a renewal, so the lease outlives the
	// restart by most of its TTL. While the server is down, the data
	// changes under it, as only a fresh snapshot can tell the workers:
	// alice adds a subscription, bob's other device prefers team-green.
	if err := sim.MarkReady(frontDoor, "camera-sub"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*worker{t1, t2, viewer, group} {
		w.mark()
	}
	t1.waitFor("renewed", publishKey)
	before := leases.since(0)
	lastRev := before[len(before)-1].revision
	calls := len(sim.Calls())
	pub := bindingOf(t, sim, "transcoder-1")
	down := time.Now()
	srv.kill()
	offline(t, dataDir, reg, func(st *statestore.Store) {
		putIntent(t, stateclient.As(st, statestore.Principal{ID: "alice"}), reg, aliceNS, extraSub, subscribe("camera-sub"))
		savePreference(t, stateclient.As(st, statestore.Principal{ID: "bob"}), reg, "bob", "team-green")
	})
	writeConfig(t, config, dataDir, srv.addr, tlsFiles, principals)
	srv = startServer(t, config)
	for _, w := range []*worker{t1, t2, viewer} {
		w.waitFor("disconnected", "")
		w.waitFor("reconnected", "")
		w.waitFor("resynced", "", detail("after reconnect"))
	}
	group.waitFor("resynced", "", detail("after disconnected"))
	t.Logf("server killed, edited offline, restarted; every worker re-snapshotted %v after the kill", time.Since(down).Round(time.Millisecond))
	// They reconcile to the new snapshot: the new subscription and the new
	// group, which nothing but the snapshot could show them.
	viewer.waitFor("bound", extraSub, detail("camera-sub"))
	group.waitFor("preference", grouppref.Key, detail("team-green"))
	group.waitFor("joined", grouppref.Key, detail("team-green"))
	// The holder keeps its lease (renewed on the new server) and its
	// publication; nothing held is started again.
	t1.waitFor("renewed", publishKey)
	leases.waitUntil(t, len(before), "transcoder-1 renewing on the restarted server", func(evs []leaseEvent) bool {
		return slices.ContainsFunc(evs, func(e leaseEvent) bool { return e.kind == "PUT" && e.owner == "transcoder-1" && e.revision > lastRev })
	})
	if got, want := callsSince(sim, calls), []string{"alice Subscribe camera-sub"}; !slices.Equal(got, want) {
		t.Fatalf("commands across the restart %v, want only %v: a command was repeated", got, want)
	}
	if now := bindingOf(t, sim, "transcoder-1"); now.ID != pub.ID {
		t.Fatalf("publication %s after the restart, want %s still", now.ID, pub.ID)
	}
	t1.noneSeen("lease-lost")
	t1.noneSeen("unbound")
	t2.noneSeen("claimed")
	viewer.noneSeen("unbound")
	wantStatus(t, opsC, reg, aliceNS, "status/alice-browser/front-door-sub", "alice", reconcile.Active, "camera-sub")
	// One join per preference: the one that got no answer and its retry,
	// none again for a refusal, none again after the restart for a group
	// already joined.
	if got, want := med.joinRequests(), []string{"bob team-red", "bob team-red", "bob team-blue", "bob team-green"}; !slices.Equal(got, want) {
		t.Fatalf("joins %v, want %v", got, want)
	}

	// The active transcoder dies: its media session ends with it, and the
	// standby takes the output only once the lease expired.
	killed := time.Now()
	t1.kill()
	sim.EndPrincipal("transcoder-1")
	t2.waitFor("claimed", publishKey)
	t2.waitFor("bound", publishKey, detail("variant "+out720))
	leases.waitUntil(t, 0, "transcoder-2's claim", func(evs []leaseEvent) bool { return claimBy(evs, 0, "transcoder-2") >= 0 })
	evs := leases.since(0)
	claim := claimBy(evs, 0, "transcoder-2")
	if claim < 2 || evs[claim-1].kind != "EXPIRE" || evs[claim-2].owner != "transcoder-1" {
		t.Fatalf("lease events %+v: want transcoder-1's entry, its EXPIRE, then transcoder-2's claim", evs)
	}
	expiry := evs[claim-2].expires
	if evs[claim].updated < expiry {
		t.Fatalf("transcoder-2 claimed at %d ms, before transcoder-1's lease expired at %d ms", evs[claim].updated, expiry)
	}
	starts := med.startsBy("transcoder-2")
	if len(starts) != 1 {
		t.Fatalf("transcoder-2 sent %d StartPublications, want 1", len(starts))
	}
	if s := starts[0]; s.at.UnixMilli() < expiry || s.leaseErr != nil || s.lease.Owner != "transcoder-2" || s.lease.Revision != evs[claim].revision {
		t.Fatalf("transcoder-2's StartPublication at %d ms with the lease %+v (%v); want after %d ms, under its own claim at revision %d",
			s.at.UnixMilli(), s.lease, s.leaseErr, expiry, evs[claim].revision)
	}
	t.Logf("transcoder-1 killed; its lease expired %v later; transcoder-2 published %v after the kill",
		time.UnixMilli(expiry).Sub(killed).Round(time.Millisecond), starts[0].at.Sub(killed).Round(time.Millisecond))
	owners, two := med.ownerLog()
	if n := len(owners); len(two) != 0 || n < 3 || owners[n-3].owner != "transcoder-1" || owners[n-2].owner != "" || owners[n-1].owner != "transcoder-2" ||
		owners[n-2].at.Before(killed) {
		t.Fatalf("owners of %s %+v, two at once %v: want transcoder-1, nobody from the kill on, then transcoder-2", out720, owners, two)
	}
	if got, want := med.calls("transcoder-2"), []string{"StartPublication " + out720}; !slices.Equal(got, want) {
		t.Fatalf("transcoder-2 sent %v, want %v", got, want)
	}

	// Transcoder-1's supervisor restarts it: it stands by. Transcoder-2 is
	// stopped with SIGTERM: it stops its publication, then releases the
	// lease, so transcoder-1 takes over at once, long before the TTL.
	t1 = transcoder(tr1)
	t1.waitFor("standby", publishKey, detail("held by transcoder-2"))
	from, calls := leases.len(), len(sim.Calls())
	stopped := bindingOf(t, sim, "transcoder-2")
	t2.signal(syscall.SIGTERM)
	t2.waitFor("stopping", "")
	t2.waitFor("unbound", publishKey, detail("worker stopping"))
	t2.waitFor("released", publishKey, detail(leaseKey))
	t2.waitFor("stopped", "")
	if code := t2.wait(); code != 0 {
		t.Fatalf("transcoder-2 exited %d after SIGTERM, want 0\n%s", code, t2.stderr)
	}
	t1.waitFor("claimed", publishKey)
	t1.waitFor("bound", publishKey, detail("variant "+out720))
	leases.waitUntil(t, from, "transcoder-1's claim after the release", func(evs []leaseEvent) bool { return claimBy(evs, 0, "transcoder-1") >= 0 })
	evs = leases.since(0)
	claim = claimBy(evs, from, "transcoder-1")
	if held := evs[claim-2]; evs[claim-1].kind != "DELETE" || held.owner != "transcoder-2" || evs[claim].updated >= held.expires {
		t.Fatalf("lease events %+v: want transcoder-2's entry, its release (DELETE), then transcoder-1's claim before %d ms, when it would have expired", evs[from-1:], held.expires)
	}
	if got, want := callsSince(sim, calls), []string{"transcoder-2 StopPublication " + stopped.ID, "transcoder-1 StartPublication " + out720}; !slices.Equal(got, want) {
		t.Fatalf("commands since the SIGTERM %v, want %v: the lease freed before the output", got, want)
	}
	wantStatus(t, opsC, reg, serviceNS, "status/transcoder-2/front-door-video-720p", "transcoder-2", reconcile.Stopped, "")

	// An administrator takes the lease away from transcoder-1, overwriting
	// it (an operator holding the output): transcoder-1 stops publishing
	// and stands by.
	hold, err := json.Marshal(lease.Document{Holder: "operator-hold", IntentKey: publishKey})
	if err != nil {
		t.Fatal(err)
	}
	pub = bindingOf(t, sim, "transcoder-1")
	if _, err := opsC.Put(ctx, statestore.PutRequest{Namespace: serviceNS, Key: leaseKey, Schema: lease.Schema, Document: hold}); err != nil {
		t.Fatal(err)
	}
	t1.waitFor("lease-lost", publishKey)
	t1.waitFor("unbound", publishKey, detail("lease lost"))
	t1.waitFor("standby", publishKey, detail("held by ops"))
	if got := med.calls("transcoder-1"); got[len(got)-1] != "StopPublication "+pub.ID {
		t.Fatalf("transcoder-1 sent %v, want StopPublication %s last", got, pub.ID)
	}
	for _, b := range sim.Bindings() {
		if b.Publish {
			t.Fatalf("a publication outlives the lease: %+v", b)
		}
	}

	// Every StartPublication was sent by the principal the store named as
	// the lease's holder at that moment.
	for _, p := range []string{"transcoder-1", "transcoder-2"} {
		for _, s := range med.startsBy(p) {
			if s.leaseErr != nil || s.lease.Owner != p {
				t.Errorf("%s's StartPublication at %s under the lease %+v (%v)", p, s.at.Format(time.StampMilli), s.lease, s.leaseErr)
			}
		}
	}

	// SIGTERM stops the rest: the viewer unsubscribes, and nobody
	// releases what is not theirs.
	viewer.signal(syscall.SIGTERM)
	viewer.waitFor("unbound", mainSub, detail("worker stopping"))
	viewer.waitFor("unbound", extraSub, detail("worker stopping"))
	for _, w := range []*worker{viewer, group, t1} {
		if w != viewer {
			w.signal(syscall.SIGTERM)
		}
		w.waitFor("stopped", "")
		if code := w.wait(); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0\n%s", w.name, code, w.stderr)
		}
	}
	for _, b := range sim.Bindings() {
		t.Errorf("a binding outlives its worker: %+v", b)
	}
	wantStatus(t, opsC, reg, aliceNS, "status/alice-browser/front-door-main", "alice", reconcile.Stopped, "")
	if e, err := opsC.Get(ctx, serviceNS, leaseKey); err != nil || e.Owner != "ops" {
		t.Fatalf("the operator's hold after the workers stopped: %+v %v", e, err)
	}
}

func subscribe(variant string) intent.Intent {
	return intent.Intent{Role: intent.Subscribe, Desired: true, SourceID: frontDoor, MediaKind: intent.Video, VariantID: variant}
}

// putIntent writes an intent as c's principal.
func putIntent(t *testing.T, c stateclient.Client, reg *schema.Registry, ns, key string, in intent.Intent) {
	t.Helper()
	doc, err := intent.Encode(reg, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, statestore.PutRequest{Namespace: ns, Key: key, Schema: intent.Schema, Document: doc}); err != nil {
		t.Fatalf("put %s/%s: %v", ns, key, err)
	}
}

// savePreference stores owner's preferred group as c's principal, as
// another of the owner's devices would.
func savePreference(t *testing.T, c stateclient.Client, reg *schema.Registry, owner, group string) {
	t.Helper()
	p, rev, err := grouppref.Load(ctx, c, reg, owner)
	if err != nil {
		t.Fatal(err)
	}
	p.PreferredGroup = group
	if _, err := grouppref.Save(ctx, c, reg, owner, p, rev); err != nil {
		t.Fatalf("save %s's preference %s: %v", owner, group, err)
	}
}

func storedPreference(t *testing.T, c stateclient.Client, reg *schema.Registry, owner string) grouppref.Preferences {
	t.Helper()
	p, _, err := grouppref.Load(ctx, c, reg, owner)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wantStatus checks the observed status at key: written by owner, in
// state, with variant ("" : any).
func wantStatus(t *testing.T, c stateclient.Client, reg *schema.Registry, ns, key, owner string, state reconcile.State, variant string) {
	t.Helper()
	e, err := c.Get(ctx, ns, key)
	if err != nil {
		t.Fatalf("status %s/%s: %v", ns, key, err)
	}
	s, err := reconcile.ParseStatus(reg, e.Document)
	if err != nil || e.Owner != owner || s.State != state || (variant != "" && s.VariantID != variant) {
		t.Fatalf("status %s/%s: %+v by %s (%v), want %s %s by %s", ns, key, s, e.Owner, err, state, variant, owner)
	}
}

// offline edits the store in dataDir in this process while no server
// holds it.
func offline(t *testing.T, dataDir string, reg *schema.Registry, edit func(*statestore.Store)) {
	t.Helper()
	st, err := statestore.Open(statestore.Options{Dir: dataDir, Schemas: reg})
	if err != nil {
		t.Fatal(err)
	}
	edit(st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// bindingOf returns principal's one publication.
func bindingOf(t *testing.T, sim *mediasim.Server, principal string) mediasim.Binding {
	t.Helper()
	var out []mediasim.Binding
	for _, b := range sim.Bindings() {
		if b.Principal == principal && b.Publish {
			out = append(out, b)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%s's publications: %+v, want one", principal, out)
	}
	return out[0]
}

// callsSince returns the commands from the n-th on, as "principal
// Command variant-or-binding".
func callsSince(sim *mediasim.Server, n int) []string {
	var out []string
	for _, c := range sim.Calls()[n:] {
		out = append(out, c.Principal+" "+callString(c))
	}
	return out
}

// claimBy is the index of the first PUT by owner from index from on that
// follows someone else's entry or none (a DELETE or an EXPIRE carries no
// owner): a claim, not a renewal. -1 if there is none.
func claimBy(evs []leaseEvent, from int, owner string) int {
	for i := from; i < len(evs); i++ {
		if evs[i].kind == "PUT" && evs[i].owner == owner && (i == 0 || evs[i-1].owner != owner) {
			return i
		}
	}
	return -1
}

// TestSIGTERMWhileConnecting: a worker told to stop while its store's
// handshake hangs stops at once with exit 0, as it holds nothing yet.
func TestSIGTERMWhileConnecting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := filepath.Join(dir, "w.token")
	if err := os.WriteFile(token, []byte("some-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A server that accepts the connection and never answers the handshake.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	w := startChild(t, "viewer", kpworkerBin, "--role", "viewer", "--endpoints", "ws://"+ln.Addr().String(), "--token-file", token,
		"--media", "http://127.0.0.1:1")
	select {
	case c := <-accepted:
		t.Cleanup(func() { c.Close() })
	case <-time.After(guard):
		t.Fatalf("the worker never dialled\n%s", w.stderr)
	}
	w.signal(syscall.SIGTERM) // the handshake has begun: the handler is installed
	if code := w.wait(); code != 0 || !strings.Contains(w.stderr.String(), "stopped while starting") {
		t.Fatalf("exit %d after SIGTERM while connecting, want 0\n%s", code, w.stderr)
	}
	for line := range w.lines {
		t.Errorf("an event from a worker that never started: %s", line)
	}
}
