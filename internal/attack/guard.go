package attack

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

// guardDocumentBytes is the document bound of the content-guard attack:
// issue 31's run had room for its 8,100-number array (about 30 KB), so the
// payloads meet the guard and not the size bound.
const guardDocumentBytes = 64 << 10

func configureGuard(c *Config, _ Scale) { c.Limits.MaxDocumentBytes = guardDocumentBytes }

// guard sends every issue 31 payload (testdoc.Issue31Payloads, the table
// package schema's own test holds the guard to) through the wire: each is
// SCHEMA_INVALID naming its JSON path as the field and what it found, and
// nothing is stored.
func guard(ctx context.Context, e *Env) error {
	ss, err := e.S.DialSession(ctx, Alice)
	if err != nil {
		return err
	}
	defer ss.Close()
	payloads := testdoc.Issue31Payloads()
	ms := make([]*pb.ClientMessage, len(payloads))
	for i, p := range payloads {
		ms[i] = PutMsg(uint64(i+1), "user/"+Alice, "guard-"+strconv.Itoa(i), p.Doc)
	}
	rs, err := ss.Results(ms)
	if err != nil {
		return err
	}
	var errs []error
	for i, p := range payloads {
		id := uint64(i + 1)
		if err := WantError(rs[id], id, statestore.SchemaInvalid, p.Path, p.Want); err != nil {
			errs = append(errs, fmt.Errorf("payload %q: %w", p.Name, err))
		}
		if _, err := e.S.Store.Get(ctx, e.S.Principal(Admin), "user/"+Alice, "guard-"+strconv.Itoa(i)); statestore.CodeOf(err) != statestore.NotFound {
			errs = append(errs, fmt.Errorf("payload %q: stored (Get answered %v)", p.Name, err))
		}
	}
	e.Record("payloads refused", "%d", len(payloads))
	return errors.Join(errs...)
}
