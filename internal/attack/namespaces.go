package attack

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// Trick is one spelling of a namespace or key that tries to reach what
// its writer may not: another user's namespace, a privileged class, or a
// path out of its own. Each must be refused with Code naming Field, and
// nothing written.
type Trick struct {
	Name      string
	Principal string
	Namespace string
	Key       string
	Code      statestore.Code
	Field     string
}

// Tricks are the 29 namespace spelling tricks issue 31's attack run tried
// (all held): the authorization is the principal's, never the spelling's.
var Tricks = []Trick{
	{"another user's namespace", Alice, "user/" + Bob, "k", statestore.PermissionDenied, "namespace"},
	{"another user's name in upper case", Alice, "user/BOB", "k", statestore.PermissionDenied, "namespace"},
	{"class in title case", Alice, "User/" + Bob, "k", statestore.InvalidArgument, "namespace"},
	{"class in upper case, own owner", Alice, "USER/" + Alice, "k", statestore.InvalidArgument, "namespace"},
	{"trailing slash", Alice, "user/" + Bob + "/", "k", statestore.InvalidArgument, "namespace"},
	{"double slash", Alice, "user//" + Bob, "k", statestore.InvalidArgument, "namespace"},
	{"dot-dot out of the own namespace", Alice, "user/" + Alice + "/../" + Bob, "k", statestore.InvalidArgument, "namespace"},
	{"dot-dot as the owner", Alice, "user/..", "k", statestore.InvalidArgument, "namespace"},
	{"dot as the owner", Alice, "user/.", "k", statestore.InvalidArgument, "namespace"},
	{"leading slash", Alice, "/user/" + Bob, "k", statestore.InvalidArgument, "namespace"},
	{"leading dot segment", Alice, "./user/" + Bob, "k", statestore.InvalidArgument, "namespace"},
	{"percent-encoded slash", Alice, "user%2F" + Bob, "k", statestore.InvalidArgument, "namespace"},
	{"percent-encoded owner", Alice, "user/%62ob", "k", statestore.InvalidArgument, "namespace"},
	{"NUL after the owner", Alice, "user/" + Bob + "\x00", "k", statestore.InvalidArgument, "namespace"},
	{"NUL between owners", Alice, "user/" + Alice + "\x00" + Bob, "k", statestore.InvalidArgument, "namespace"},
	{"leading space", Alice, " user/" + Bob, "k", statestore.InvalidArgument, "namespace"},
	{"trailing newline", Alice, "user/" + Bob + "\n", "k", statestore.InvalidArgument, "namespace"},
	{"Cyrillic o (confusable)", Alice, "user/b\u043eb", "k", statestore.InvalidArgument, "namespace"},
	{"fullwidth letters", Alice, "user/\uff42\uff4f\uff42", "k", statestore.InvalidArgument, "namespace"},
	{"zero-width space", Alice, "user/" + Bob + "\u200b", "k", statestore.InvalidArgument, "namespace"},
	{"backslash separator", Alice, "user\\" + Bob, "k", statestore.InvalidArgument, "namespace"},
	{"system", Alice, "system", "k", statestore.PermissionDenied, "namespace"},
	{"system/<own id>", Alice, "system/" + Alice, "k", statestore.PermissionDenied, "namespace"},
	{"service/<own id>", Alice, "service/" + Alice, "k", statestore.PermissionDenied, "namespace"},
	{"group/<own id>", Alice, "group/" + Alice, "k", statestore.PermissionDenied, "namespace"},
	{"a service principal's own service/<id>", Service, "service/" + Service, "k", statestore.PermissionDenied, "namespace"},
	{"class without an owner", Alice, "user", "k", statestore.InvalidArgument, "namespace"},
	{"dot-dot in the key", Alice, "user/" + Alice, "../" + Bob + "/k", statestore.InvalidArgument, "key"},
	{"absolute key naming another namespace", Alice, "user/" + Alice, "/user/" + Bob + "/k", statestore.InvalidArgument, "key"},
}

// namespaces runs the tricks (each refused as its row says, nothing
// written, which an administrator's Get and the store's usage confirm),
// owner spoofing (a PutState carrying another user's name in fields the
// protocol does not have: the entry's owner is the authenticated
// principal), and NOT_FOUND-versus-PERMISSION_DENIED probing (another
// user's existing and missing keys are refused alike).
func namespaces(ctx context.Context, e *Env) error {
	admin, err := e.S.DialSession(ctx, Admin)
	if err != nil {
		return err
	}
	defer admin.Close()
	sessions := map[string]*Session{}
	for _, id := range []string{Alice, Bob, Service} {
		ss, err := e.S.DialSession(ctx, id)
		if err != nil {
			return err
		}
		defer ss.Close()
		sessions[id] = ss
	}
	entries, _, _ := e.S.Store.Usage()
	listing := e.S.Store.Namespaces()
	var errs []error
	for i, tr := range Tricks {
		id := uint64(i + 1)
		r, err := sessions[tr.Principal].Call(PutMsg(id, tr.Namespace, tr.Key, testdoc.MediaIntent(300, i)))
		if err != nil {
			return fmt.Errorf("trick %q: %w", tr.Name, err)
		}
		if err := WantError(r, id, tr.Code, tr.Field, ""); err != nil {
			errs = append(errs, fmt.Errorf("trick %q (%s writing %q key %q): %w", tr.Name, tr.Principal, tr.Namespace, tr.Key, err))
		}
		g, err := admin.Call(GetMsg(id, tr.Namespace, tr.Key))
		if err != nil {
			return err
		}
		if code := g.GetError().GetCode(); g.GetEntry() != nil || (code != pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_NOT_FOUND &&
			code != pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_INVALID_ARGUMENT) {
			errs = append(errs, fmt.Errorf("trick %q: the administrator's Get answered %v, want NOT_FOUND or INVALID_ARGUMENT", tr.Name, g))
		}
	}
	if n, _, _ := e.S.Store.Usage(); n != entries {
		errs = append(errs, fmt.Errorf("%d entries after the tricks, %d before", n, entries))
	}
	if got := e.S.Store.Namespaces(); !slices.EqualFunc(got, listing, func(a, b statestore.NamespaceListing) bool { return a.Name == b.Name }) {
		errs = append(errs, fmt.Errorf("namespaces after the tricks %v, before %v", got, listing))
	}
	e.Record("namespace tricks refused", "%d", len(Tricks))
	errs = append(errs, ownerSpoofing(admin, sessions[Alice], sessions[Bob]), probing(ctx, e, sessions[Alice]))
	return errors.Join(errs...)
}

// spoofedPut is alice's PutState with bob's name in unknown fields of the
// request and of the envelope (where a later version's owner field might
// be): proto3 keeps unknown fields, the store must not read them.
func spoofedPut(id uint64, ns, key string, doc []byte) ([]byte, error) {
	put, err := proto.Marshal(PutMsg(id, ns, key, doc).GetPutState())
	if err != nil {
		return nil, err
	}
	for _, num := range []protowire.Number{8, 9, 15, 100} {
		put = protowire.AppendTag(put, num, protowire.BytesType)
		put = protowire.AppendString(put, Bob)
	}
	var b []byte
	b = protowire.AppendTag(b, 2, protowire.BytesType) // ClientMessage.put_state
	b = protowire.AppendBytes(b, put)
	b = protowire.AppendTag(b, 99, protowire.BytesType)
	return protowire.AppendString(b, "owner="+Bob), nil
}

func ownerSpoofing(admin, alice, bob *Session) error {
	b, err := spoofedPut(1000, "user/"+Alice, "spoof", testdoc.MediaIntent(300, 1))
	if err != nil {
		return err
	}
	// Decoded, the unknown fields are kept and sent again as they are.
	spoof := &pb.ClientMessage{}
	if err := proto.Unmarshal(b, spoof); err != nil || len(spoof.ProtoReflect().GetUnknown()) == 0 {
		return fmt.Errorf("owner spoofing: the spoofed message lost its unknown fields (%v)", err)
	}
	if err := alice.Send(spoof); err != nil {
		return err
	}
	m, err := alice.Next()
	if err != nil {
		return err
	}
	if r := m.GetResult(); r.GetRequestId() != 1000 || r.GetEntry().GetOwner() != Alice {
		return fmt.Errorf("owner spoofing: answered %v, want the entry owned by %q", m, Alice)
	}
	g, err := admin.Call(GetMsg(1001, "user/"+Alice, "spoof"))
	if err != nil {
		return err
	}
	if g.GetEntry().GetOwner() != Alice {
		return fmt.Errorf("owner spoofing: the administrator reads %v, want the owner %q", g, Alice)
	}
	// The spoofed name grants bob nothing.
	r, err := bob.Call(GetMsg(1002, "user/"+Alice, "spoof"))
	if err != nil {
		return err
	}
	if err := WantError(r, 1002, statestore.PermissionDenied, "namespace", ""); err != nil {
		return fmt.Errorf("owner spoofing: bob reading the entry: %w", err)
	}
	return nil
}

// probing: alice asks for bob's existing key and for a missing one, by
// Get, Delete and Watch: each pair is answered identically, so the
// answers tell nothing of what bob holds.
func probing(ctx context.Context, e *Env, alice *Session) error {
	if _, err := e.S.Store.Put(ctx, e.S.Principal(Bob), statestore.PutRequest{Namespace: "user/" + Bob, Key: "exists", Schema: schema.MediaIntentV1,
		Document: testdoc.MediaIntent(300, 2)}); err != nil {
		return err
	}
	ns := "user/" + Bob
	del := func(id uint64, key string) *pb.ClientMessage {
		return &pb.ClientMessage{Message: &pb.ClientMessage_DeleteState{DeleteState: &pb.DeleteState{RequestId: id, Namespace: ns, Key: key}}}
	}
	pairs := []struct {
		verb           string
		exists, absent *pb.ClientMessage
	}{
		{"get", GetMsg(2001, ns, "exists"), GetMsg(2002, ns, "missing")},
		{"delete", del(2003, "exists"), del(2004, "missing")},
		{"watch", WatchMsg(2005, "p1", ns, "exists"), WatchMsg(2006, "p2", ns, "missing")},
	}
	for _, p := range pairs {
		a, err := alice.Call(p.exists)
		if err != nil {
			return err
		}
		b, err := alice.Call(p.absent)
		if err != nil {
			return err
		}
		ea, eb := a.GetError(), b.GetError()
		if ea == nil || eb == nil || ea.GetCode() != pb.StateStoreErrorCode_STATE_STORE_ERROR_CODE_PERMISSION_DENIED ||
			!proto.Equal(ea, eb) {
			return fmt.Errorf("probing by %s: the existing key answered %v, the missing one %v, want the same PERMISSION_DENIED", p.verb, a, b)
		}
	}
	if _, err := e.S.Store.Get(ctx, e.S.Principal(Admin), ns, "exists"); err != nil {
		return fmt.Errorf("probing: bob's entry after alice's delete: %w", err)
	}
	return nil
}
