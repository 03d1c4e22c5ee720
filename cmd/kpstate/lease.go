package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/cliflag"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/stateclient"
)

// leaseCommands are the verbs of kpstate lease.
var leaseCommands = []cliflag.Sub{
	{Name: "hold", Summary: "claim a key create-only with a TTL, renew it until interrupted, then release it", Run: runLeaseHold},
}

func runLease(args []string, stdout, stderr io.Writer) int {
	return cliflag.Table{Program: cliflag.Program{Name: "kpstate lease", ExitCodes: leaseExitCodes}, Subs: leaseCommands,
		Usage: func(w io.Writer) {
			fmt.Fprintln(w, "kpstate lease: leases, the store's service coordination (worker/lease's protocol)")
			fmt.Fprintln(w, "\nUsage: kpstate lease <command> [flags]   (kpstate lease help <command> for its flags)")
			fmt.Fprintln(w, "\nCommands:")
			cliflag.Table{Subs: leaseCommands}.PrintSubs(w)
			fmt.Fprintln(w, "\nExamples:\n  kpstate lease hold service/transcoder-a leases/front-door-video --ttl 10s")
			fmt.Fprintln(w, "\nExit codes: "+leaseExitCodes)
		}}.Run(args, stdout, stderr)
}

// leaseExitCodes are lease hold's: 1 also when another holds the lease
// or this one lost it.
const leaseExitCodes = "0 success, 1 the store refused the request (the lease is held by another: stderr names its " +
	"owner and expiry; or it was lost: a renewal refused; or another code; with --json stdout carries {\"error\":{...}}), " +
	"2 usage, connection or I/O error (a refused handshake shows the server's reason; a lease not renewed within its TTL " +
	"for want of a connection)"

func runLeaseHold(args []string, stdout, stderr io.Writer) int {
	h := cliflag.Help{Synopsis: "NS KEY --ttl D [--schema S --file F] [--holder ID] [--json]",
		About: `Holds a lease as worker/lease does: claims KEY create-only with the TTL (it fails CONFLICT, exit 1,
when the key exists, and says who holds it: the owning principal, the holder its document names, and
when it expires), prints that it holds it, renews it every third of the TTL by a compare-and-set on its
own last revision, and on SIGINT or SIGTERM releases it by deleting that revision, so a standby can
claim it at once; then exits 0. A renewal refused CONFLICT or NOT_FOUND means the lease was lost (it
lapsed, or was deleted or overwritten): it says so and exits 1. A renewal that fails for want of a
connection is retried until the TTL since the last renewal has run out, then it exits 2. The document
is --file's, against --schema, or by default a keeppeek.worker-lease.v1 naming --holder (default
kpstate-HOST-PID), which the worker kit's standbys read.`,
		Examples: []string{"kpstate lease hold service/transcoder-a leases/front-door-video --ttl 10s --token-file ops.token",
			"kpstate lease hold user/alice leases/editor --ttl 30s --schema keeppeek.worker-lease.v1 --file lease.json"}}
	h.About += clientAbout
	c := cliflag.New(cliflag.Program{Name: program.Name, ExitCodes: leaseExitCodes}, "lease hold", h, stdout, stderr)
	o := &clientOptions{cmd: c, follow: true}
	ttl := c.FS.Duration("ttl", 0, "the lease's TTL `D` (required; at least the server's min_ttl, 1s by default)")
	schemaName := c.FS.String("schema", "", "the document's schema `S` (with --file)")
	file := c.FS.String("file", "", "read the document from `F` (with --schema)")
	holder := c.FS.String("holder", "", "the holder `ID` the default document names: letters, digits, '.', '_', '-' (default kpstate-HOST-PID)")
	if code := o.parse(args, 2); code >= 0 {
		return code
	}
	switch {
	case *ttl <= 0:
		return c.UsageError("--ttl is required: a positive duration")
	case (*schemaName == "") != (*file == ""):
		return c.UsageError("--schema and --file go together (neither: a keeppeek.worker-lease.v1 document)")
	case *file != "" && *holder != "":
		return c.UsageError("--holder names the holder in the default document; --file gives the whole document")
	}
	hd := leaseHold{o: o, ns: c.FS.Arg(0), key: c.FS.Arg(1), ttl: *ttl, schema: *schemaName}
	if *file != "" {
		doc, err := os.ReadFile(*file)
		if err != nil {
			return o.fail(&inputError{Flag: "--file", Value: *file, Err: err})
		}
		hd.doc = doc
	} else {
		if *holder == "" {
			*holder = defaultHolder()
		}
		// Not checked here: the server judges the document against the
		// schema, and its refusal names the field.
		hd.schema = lease.Schema
		hd.doc, _ = json.Marshal(lease.Document{Holder: *holder}) // two strings: it cannot fail
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cl, err := o.dial(ctx)
	if err != nil {
		return o.interrupted(ctx, err)
	}
	defer cl.Close()
	hd.c = cl
	return hd.run(ctx)
}

// defaultHolder names this process: kpstate-HOST-PID, with what the lease
// schema's holder pattern does not allow in a host name made '-'.
func defaultHolder() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return r
		}
		return '-'
	}, host)
	if host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("kpstate-%.100s-%d", host, os.Getpid())
}

// leaseHold is one run of lease hold. The protocol is worker/lease's
// (create-only claim, renewal on its own revision, release by deleting it),
// kept here rather than through lease.Lease because that type writes only
// its own document, and lease hold writes any: a key others' code treats
// as a lock.
type leaseHold struct {
	o        *clientOptions
	c        stateclient.Client
	ns, key  string
	ttl      time.Duration
	schema   string
	doc      []byte
	rev      uint64    // our last write's revision
	deadline time.Time // our last write's start plus the TTL: it cannot expire before
}

// leaseLine is one line of lease hold --json.
type leaseLine struct {
	Event     string     `json:"event"` // held, renewed, released
	Namespace string     `json:"namespace"`
	Key       string     `json:"key"`
	Revision  uint64     `json:"revision"` // released: the deletion's
	Entry     *entryJSON `json:"entry,omitempty"`
}

func (h *leaseHold) put(ctx context.Context, x statestore.Expect) (statestore.Entry, error) {
	start := time.Now()
	e, err := h.c.Put(ctx, statestore.PutRequest{Namespace: h.ns, Key: h.key, Schema: h.schema, Document: h.doc, Expect: x, TTL: h.ttl})
	if err == nil {
		// The server starts the TTL when it commits, after start: the
		// lease lasts at least until here by our own (monotonic) clock,
		// whatever the server's clock says.
		h.rev, h.deadline = e.Revision, start.Add(h.ttl)
	}
	return e, err
}

func (h *leaseHold) run(ctx context.Context) int {
	o := h.o
	// Neither the claim nor a renewal is cut short by the signal: a write
	// abandoned midway has an unknown outcome, and the release must know
	// our revision. The loop sees the signal once the write is answered.
	e, err := h.put(context.Background(), statestore.CreateOnly)
	if err != nil {
		if se, ok := storeRefusal(err); ok && se.Code == statestore.Conflict {
			return h.heldByAnother(se)
		}
		return o.fail(err)
	}
	every := h.ttl / 3
	if code := h.report("held", e, fmt.Sprintf("holding %s %s at revision %d (ttl %v, expires %s); renewing every %v until SIGINT or SIGTERM\n",
		h.ns, h.key, e.Revision, h.ttl, expiresText(e.ExpiresMs), every)); code != exitOK {
		h.release()
		return code
	}
	retry := max(h.ttl/10, 50*time.Millisecond)
	next := time.NewTimer(every)
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return h.release()
		case <-next.C:
		}
		// No longer than the lease can last: past that it may have lapsed
		// and been claimed by another, so waiting on says nothing.
		rctx, cancel := context.WithDeadline(context.Background(), h.deadline)
		e, err := h.put(rctx, statestore.IfRevision(h.rev))
		cancel()
		if err == nil {
			if code := h.report("renewed", e, fmt.Sprintf("renewed at revision %d (expires %s)\n", e.Revision, expiresText(e.ExpiresMs))); code != exitOK {
				h.release()
				return code
			}
			next.Reset(every)
			continue
		}
		se, refused := storeRefusal(err)
		switch {
		case refused && (se.Code == statestore.Conflict || se.Code == statestore.NotFound):
			return o.refuse(refusalOf(se), fmt.Sprintf("lost the lease %s %s: the renewal of revision %d was refused", h.ns, h.key, h.rev))
		case refused && se.Code != statestore.Unavailable:
			return o.refuse(refusalOf(se), fmt.Sprintf("the renewal of %s %s at revision %d was refused", h.ns, h.key, h.rev))
		case !time.Now().Before(h.deadline):
			return o.cmd.Fail(exitUsage, "lost the lease %s %s: not renewed within its TTL %v since revision %d: %v", h.ns, h.key, h.ttl, h.rev, err)
		}
		o.note("renewing %s %s at revision %d: %v; again in %v (it lapses in %v)", h.ns, h.key, h.rev, err, retry, time.Until(h.deadline).Round(time.Millisecond))
		next.Reset(min(retry, time.Until(h.deadline)))
	}
}

// report prints a held or renewed line.
func (h *leaseHold) report(event string, e statestore.Entry, text string) int {
	if h.o.json {
		j := entryOf(e)
		return h.o.printJSON(leaseLine{Event: event, Namespace: h.ns, Key: h.key, Revision: e.Revision, Entry: &j})
	}
	return h.o.printf("%s", text)
}

// heldByAnother reports a claim's CONFLICT with who holds the lease.
func (h *leaseHold) heldByAnother(se *statestore.Error) int {
	r := refusalOf(se)
	why := fmt.Sprintf("%s %s is held at revision %d", h.ns, h.key, se.CurrentRevision)
	ctx, cancel := context.WithTimeout(context.Background(), h.o.timeout)
	defer cancel()
	cur, err := h.c.Get(ctx, h.ns, h.key)
	switch {
	case err == nil:
		r.Owner, r.Expires = cur.Owner, msTime(cur.ExpiresMs)
		if cur.ExpiresMs == 0 {
			r.Expires = ""
		}
		var d lease.Document
		if cur.Schema == lease.Schema && json.Unmarshal(cur.Document, &d) == nil {
			r.Holder = d.Holder
		}
		why = fmt.Sprintf("%s %s is held by principal %s", h.ns, h.key, cur.Owner)
		if r.Holder != "" {
			why += " (holder " + r.Holder + ")"
		}
		why += fmt.Sprintf(" at revision %d, expires %s", cur.Revision, expiresText(cur.ExpiresMs))
	case statestore.CodeOf(err) == statestore.NotFound:
		why += ", which has since gone: try again"
	default:
		why += fmt.Sprintf(" (reading who holds it: %v)", err)
	}
	return h.o.refuse(r, why)
}

// release deletes our revision, with a fresh deadline: the run's context
// is the signal's, already done.
func (h *leaseHold) release() int {
	o := h.o
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	rev, err := h.c.Delete(ctx, statestore.DeleteRequest{Namespace: h.ns, Key: h.key, Expect: statestore.IfRevision(h.rev)})
	if err != nil {
		se, refused := storeRefusal(err)
		if refused && (se.Code == statestore.Conflict || se.Code == statestore.NotFound) {
			return o.refuse(refusalOf(se), fmt.Sprintf("lost the lease %s %s before the release: revision %d is gone", h.ns, h.key, h.rev))
		}
		if refused {
			return o.refuse(refusalOf(se), fmt.Sprintf("releasing %s %s at revision %d", h.ns, h.key, h.rev))
		}
		return o.cmd.Fail(exitUsage, "releasing %s %s at revision %d: %v (unless renewed, it lapses by itself within its TTL %v)", h.ns, h.key, h.rev, err, h.ttl)
	}
	if o.json {
		return o.printJSON(leaseLine{Event: "released", Namespace: h.ns, Key: h.key, Revision: rev})
	}
	return o.printf("released %s %s: deleted at revision %d\n", h.ns, h.key, rev)
}
