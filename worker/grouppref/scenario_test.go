package grouppref_test

import (
	"context"
	"errors"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/storetest"
	"github.com/keeppeek/statestore/worker/grouppref"
	"github.com/keeppeek/statestore/worker/intent"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
	"github.com/keeppeek/statestore/worker/stateclient"
)

var ctx = context.Background()

// TestScenario6PreferredGroupGrantsNothing: a group client persists a
// preferred group under user/<owner>/ and gains neither membership nor the
// right to publish: group/ writes are denied, GroupState lists it only
// after a successful join, and the server refuses its publication into
// the group until then.
func TestScenario6PreferredGroupGrantsNothing(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, grouppref.RegisterSchema)
	sim := mediasim.New()
	sim.AddGroup("team-blue", "alice")
	alice := stateclient.As(st.Store, statestore.Principal{ID: "alice"})

	rev, err := grouppref.Save(ctx, alice, st.Reg, "alice", grouppref.Preferences{PreferredGroup: "team-blue", MuteLayout: []string{"bob"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, gotRev, err := grouppref.Load(ctx, alice, st.Reg, "alice")
	if err != nil || got.PreferredGroup != "team-blue" || gotRev != rev {
		t.Fatalf("load: %+v rev %d %v", got, gotRev, err)
	}
	// Shared group state cannot be claimed by a client: group/ is
	// administrators only, whatever the document says.
	member := []byte(`{"role":"publish","desired":true,"source_id":"alice-cam","media_kind":"video","recording_mode":"inherit"}`)
	for _, ns := range []string{"group/team-blue", "user/bob"} {
		_, err := alice.Put(ctx, statestore.PutRequest{Namespace: ns, Key: "members/alice", Schema: intent.Schema, Document: member})
		if !errors.Is(err, statestore.ErrPermissionDenied) {
			t.Fatalf("alice wrote %s: %v", ns, err)
		}
		if st.Namespace(ns).Revision != 0 {
			t.Fatalf("a denied write changed %s", ns)
		}
	}
	if m := sim.GroupState("team-blue").Members; len(m) != 0 {
		t.Fatalf("members %v before any join", m)
	}
	cam := sim.Connect("alice-cam", mediasim.SourceSpec{Streams: []intent.MediaKind{intent.Video}, Publishable: true,
		Profiles: []reconcile.Profile{{ID: "group-h264-360p", Codec: "h264"}}})
	pub := reconcile.PublicationRequest{SourceSessionID: cam, MediaKind: intent.Video, VariantID: "group-h264-360p",
		OutputProfile: "group-h264-360p", RecordingMode: intent.RecordingInherit, Group: "team-blue"}
	_, err = sim.Client("alice").StartPublication(ctx, pub)
	if !errors.Is(err, &reconcile.CommandError{Code: reconcile.PublicationPermissionDenied}) {
		t.Fatalf("publish into the preferred group without joining: %v", err)
	}
	// Only a successful join grants membership, and with it the publication.
	if err := sim.Join("mallory", "team-blue"); err == nil {
		t.Fatal("a join the group does not admit succeeded")
	}
	if err := sim.Join("alice", "team-blue"); err != nil {
		t.Fatal(err)
	}
	if m := sim.GroupState("team-blue").Members; len(m) != 1 || m[0] != "alice" {
		t.Fatalf("members after join %v", m)
	}
	if _, err := sim.Client("alice").StartPublication(ctx, pub); err != nil {
		t.Fatalf("publish after joining: %v", err)
	}
}

func TestSaveConflictAndRejects(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, grouppref.RegisterSchema)
	alice := stateclient.As(st.Store, statestore.Principal{ID: "alice"})
	if _, err := grouppref.Save(ctx, alice, st.Reg, "alice", grouppref.Preferences{PreferredGroup: "g1"}, 0); err != nil {
		t.Fatal(err)
	}
	// A second device saving from "none stored" loses instead of
	// overwriting the first.
	if _, err := grouppref.Save(ctx, alice, st.Reg, "alice", grouppref.Preferences{AudioDevice: "usb"}, 0); !errors.Is(err, statestore.ErrConflict) {
		t.Fatalf("stale save: %v", err)
	}
	// Someone else's namespace, and a group name the schema refuses.
	if _, err := grouppref.Save(ctx, alice, st.Reg, "bob", grouppref.Preferences{PreferredGroup: "g1"}, 0); !errors.Is(err, statestore.ErrPermissionDenied) {
		t.Fatalf("saved into bob's namespace: %v", err)
	}
	_, err := grouppref.Save(ctx, alice, st.Reg, "alice", grouppref.Preferences{PreferredGroup: "../admins"}, 1)
	if err == nil || st.Namespace("user/alice").Revision != 1 {
		t.Fatalf("an invalid group name was saved: %v", err)
	}
	// A watcher parses what Load reads, and refuses what Save would.
	e, err := alice.Get(ctx, grouppref.Namespace("alice"), grouppref.Key)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := grouppref.Parse(st.Reg, e.Document); err != nil || p.PreferredGroup != "g1" {
		t.Fatalf("parse of the stored preferences: %+v %v", p, err)
	}
	if p, err := grouppref.Parse(st.Reg, []byte(`{"preferred_group":"../admins"}`)); err == nil {
		t.Fatalf("parsed an invalid group name: %+v", p)
	}
}
