package dispatch_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore/internal/wiredemo"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var sampleEntry = &pb.StateEntry{Namespace: "service/transcoder-a", Key: "intents/front-door-video", Schema: "keeppeek.media-intent.v1",
	Owner: "coordinator", Revision: 121, CreatedAtMs: 1767268800000, UpdatedAtMs: 1767268801000, ExpiresAtMs: 1767268831000,
	Document: []byte(`{"role":"publish","desired":true,"source_id":"front-door","media_kind":"video","recording_mode":"disabled"}`)}

func result(r *pb.StateStoreResult) *pb.ServerMessage {
	return &pb.ServerMessage{Message: &pb.ServerMessage_Result{Result: r}}
}

// goldenMessages is one example of every message, each inside its
// envelope (the unit that goes on the wire), named after the message.
func goldenMessages() map[string]proto.Message {
	return map[string]proto.Message{
		"get_state":                           getReq(1, "service/transcoder-a", "intents/front-door-video"),
		"put_state":                           putReq(2, "service/transcoder-a", "intents/front-door-video", sampleEntry.Document, rev(120), 30000),
		"delete_state":                        deleteReq(3, "service/transcoder-a", "intents/front-door-video", rev(121)),
		"watch_state":                         watchReq(41, "transcode-intents", "service/transcoder-a", "intents/"),
		"unwatch_state":                       unwatchReq(43, "transcode-intents"),
		"watch_state_ack":                     ackReq(42, "transcode-intents", 1),
		"state_store_result_entry":            result(&pb.StateStoreResult{RequestId: 1, Result: &pb.StateStoreResult_Entry{Entry: sampleEntry}}),
		"state_store_result_deleted_revision": result(&pb.StateStoreResult{RequestId: 3, Result: &pb.StateStoreResult_DeletedRevision{DeletedRevision: 122}}),
		"state_store_result_watch": result(&pb.StateStoreResult{RequestId: 41, Result: &pb.StateStoreResult_Watch{Watch: &pb.StateStoreWatchSnapshot{
			WatchId: "transcode-intents", SnapshotRevision: 121, Entries: []*pb.StateEntry{sampleEntry}}}}),
		"state_store_result_ok": result(&pb.StateStoreResult{RequestId: 43, Result: &pb.StateStoreResult_Ok{Ok: &pb.StateStoreOk{}}}),
		"state_store_result_error": result(&pb.StateStoreResult{RequestId: 2, Result: &pb.StateStoreResult_Error{Error: &pb.StateStoreError{
			Code: codeConflict, CurrentRevision: 121, Field: "expected_revision", Message: "expected revision 120, current revision 121"}}}),
		"state_watch_ack_result": &pb.ServerMessage{Message: &pb.ServerMessage_AckResult{AckResult: &pb.StateWatchAckResult{
			RequestId: 42, WatchId: "transcode-intents", AppliedSequence: 1}}},
		"state_store_watch_update_put": &pb.ServerMessage{Message: &pb.ServerMessage_WatchUpdate{WatchUpdate: &pb.StateStoreWatchUpdate{
			WatchId: "transcode-intents", WatchSequence: 1, Revision: 121, Kind: kindPut, Entry: sampleEntry}}},
		"state_store_watch_update_delete": &pb.ServerMessage{Message: &pb.ServerMessage_WatchUpdate{WatchUpdate: &pb.StateStoreWatchUpdate{
			WatchId: "transcode-intents", WatchSequence: 2, Revision: 122, Kind: kindDelete, Key: "intents/front-door-video"}}},
		"state_store_watch_update_expire": &pb.ServerMessage{Message: &pb.ServerMessage_WatchUpdate{WatchUpdate: &pb.StateStoreWatchUpdate{
			WatchId: "transcode-intents", WatchSequence: 2, Revision: 122, Kind: kindExpire, Key: "intents/front-door-video"}}},
		"state_store_watch_closed": &pb.ServerMessage{Message: &pb.ServerMessage_WatchClosed{WatchClosed: &pb.StateStoreWatchClosed{
			WatchId: "transcode-intents", Reason: pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_ACK_TIMEOUT,
			Message: "update 1 unacknowledged for 30s (deadline 30s)"}}},
	}
}

// TestGoldenMessages pins the encoding of every message: the binary file
// byte for byte (deterministic marshalling), the text file by parsing it
// back (the text printer varies its spacing on purpose).
func TestGoldenMessages(t *testing.T) {
	t.Parallel()
	for name, m := range goldenMessages() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bin, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			binPath := filepath.Join("testdata", "golden", name+".binpb")
			txtPath := filepath.Join("testdata", "golden", name+".txtpb")
			if *update {
				writeGolden(t, binPath, bin)
				writeGolden(t, txtPath, []byte(prototext.MarshalOptions{Multiline: true}.Format(m)))
			}
			want, err := os.ReadFile(binPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(bin, want) {
				t.Errorf("%s: encoding changed\n got %x\nwant %x", binPath, bin, want)
			}
			txt, err := os.ReadFile(txtPath)
			if err != nil {
				t.Fatal(err)
			}
			parsed := m.ProtoReflect().New().Interface()
			if err := prototext.Unmarshal(txt, parsed); err != nil {
				t.Fatalf("%s: %v", txtPath, err)
			}
			if !proto.Equal(parsed, m) {
				t.Errorf("%s parses as %v, want %v", txtPath, parsed, m)
			}
			decoded := m.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(want, decoded); err != nil || !proto.Equal(decoded, m) {
				t.Errorf("%s decodes as %v (%v)", binPath, decoded, err)
			}
		})
	}
}

func writeGolden(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The diagram file: one block per message, in wire order, each headed by
// "--- C->K" or "--- K->C" and holding the envelope in text form.
const diagramPath = "testdata/sequence_diagram.txtpb"

// TestSequenceDiagram reproduces the specification's sequence diagram
// through a live dispatcher, message for message, and compares it with the
// golden file.
func TestSequenceDiagram(t *testing.T) {
	t.Parallel()
	var got []wiredemo.Step
	if err := wiredemo.Run(t.TempDir(), func(s wiredemo.Step) { got = append(got, s) }); err != nil {
		t.Fatal(err)
	}
	if *update {
		var b strings.Builder
		b.WriteString("# The specification's sequence diagram, as the dispatcher exchanged it (dispatch TestSequenceDiagram).\n")
		for _, s := range got {
			fmt.Fprintf(&b, "--- %s\n%s", direction(s.FromClient), prototext.MarshalOptions{Multiline: true}.Format(s.Message))
		}
		writeGolden(t, diagramPath, []byte(b.String()))
	}
	raw, err := os.ReadFile(diagramPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(raw), "--- ")[1:]
	if len(blocks) != len(got) {
		t.Fatalf("%d messages exchanged, the golden file has %d", len(got), len(blocks))
	}
	for i, blk := range blocks {
		head, body, _ := strings.Cut(blk, "\n")
		if head != direction(got[i].FromClient) {
			t.Fatalf("message %d goes %s, golden %s", i+1, direction(got[i].FromClient), head)
		}
		want := got[i].Message.ProtoReflect().New().Interface()
		if err := prototext.Unmarshal([]byte(body), want); err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
		if !proto.Equal(want, got[i].Message) {
			t.Errorf("message %d:\n got %v\nwant %v", i+1, got[i].Message, want)
		}
	}
	// The diagram's landmarks, so a regenerated file cannot drift from it.
	checks := []struct {
		i    int
		desc string
		ok   func(m proto.Message) bool
	}{
		{0, "WatchState 41", func(m proto.Message) bool { return m.(*pb.ClientMessage).GetWatchState().GetRequestId() == 41 }},
		{1, "snapshot 41 at 120", func(m proto.Message) bool {
			r := m.(*pb.ServerMessage).GetResult()
			return r.GetRequestId() == 41 && r.GetWatch().GetSnapshotRevision() == 120 && len(r.GetWatch().GetEntries()) == 1
		}},
		{2, "PUT seq 1 rev 121", func(m proto.Message) bool {
			u := m.(*pb.ServerMessage).GetWatchUpdate()
			return u.GetWatchSequence() == 1 && u.GetRevision() == 121 && u.GetKind() == kindPut && u.GetEntry() != nil
		}},
		{3, "ack 42", func(m proto.Message) bool { return m.(*pb.ClientMessage).GetWatchStateAck().GetAppliedSequence() == 1 }},
		{4, "ack result 42", func(m proto.Message) bool {
			a := m.(*pb.ServerMessage).GetAckResult()
			return a.GetRequestId() == 42 && a.GetWatchId() == "transcode-intents" && a.GetAppliedSequence() == 1
		}},
		{5, "EXPIRE seq 2 rev 122", func(m proto.Message) bool {
			u := m.(*pb.ServerMessage).GetWatchUpdate()
			return u.GetWatchSequence() == 2 && u.GetRevision() == 122 && u.GetKind() == kindExpire && u.GetKey() != ""
		}},
	}
	if len(got) != len(checks) {
		t.Fatalf("%d messages, the diagram has %d", len(got), len(checks))
	}
	for _, c := range checks {
		if !c.ok(got[c.i].Message) {
			t.Errorf("message %d is not the diagram's %s: %v", c.i+1, c.desc, got[c.i])
		}
	}
}

func direction(fromClient bool) string {
	if fromClient {
		return "C->K"
	}
	return "K->C"
}
