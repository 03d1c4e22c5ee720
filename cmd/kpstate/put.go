package main

import (
	"context"
	"io"
	"os"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/cliflag"
)

// stdin is what `kpstate put ... -` reads the document from.
var stdin io.Reader = os.Stdin

func runPut(args []string, stdout, stderr io.Writer) int {
	c, o := newClientCommand("put", cliflag.Help{Synopsis: "NS KEY --schema S (--file F | -) [--create | --if-revision N] [--ttl D] [--json]",
		About: `Writes one entry: the document (a JSON object valid against --schema) from --file, or from stdin
when the last argument is -. By default the write is blind; --create writes only if the key does not
exist, --if-revision N only if the key's revision is N (compare-and-set), and either fails CONFLICT
(exit 1) naming the current revision otherwise. --ttl makes the entry a lease that expires unless
rewritten within D (at least the server's min_ttl, 1s by default). Prints the committed revision;
--json prints the entry as kpstate get --json does.`,
		Examples: []string{"kpstate put service/transcoder-a intents/front-door-video --schema keeppeek.media-intent.v1 --file intent.json --create",
			"echo '{\"preferred_group\":\"living-room\"}' | kpstate put user/alice prefs --schema keeppeek.group-preference.v1 - --if-revision 3"}}, stdout, stderr)
	schemaName := c.FS.String("schema", "", "the document's schema `S` (required), e.g. keeppeek.media-intent.v1")
	file := c.FS.String("file", "", "read the document from `F` (or give - as the last argument for stdin)")
	create := c.FS.Bool("create", false, "create only: fail CONFLICT if the key exists")
	ifRevision := c.FS.Uint64("if-revision", 0, "compare-and-set: fail CONFLICT unless the key's revision is `N`")
	ttl := c.FS.Duration("ttl", 0, "make the entry a lease expiring after `D` unless rewritten (0: none)")
	if code := o.parse(args, 2, 3); code >= 0 {
		return code
	}
	fromStdin := c.FS.NArg() == 3
	switch {
	case fromStdin && c.FS.Arg(2) != "-":
		return c.UsageError("unexpected argument %q (the third argument can only be -, for stdin)", c.FS.Arg(2))
	case *schemaName == "":
		return c.UsageError("--schema is required")
	case *file == "" && !fromStdin:
		return c.UsageError("the document: give --file F, or - to read stdin")
	case *file != "" && fromStdin:
		return c.UsageError("--file and - are two documents: give one")
	case *create && c.FS.Changed("if-revision"):
		return c.UsageError("--create and --if-revision are exclusive (--if-revision 0 is --create)")
	case *ttl < 0:
		return c.UsageError("--ttl %v: want 0 (no lease) or a positive duration", *ttl)
	}
	var doc []byte
	var err error
	if fromStdin {
		doc, err = io.ReadAll(stdin)
		if err != nil {
			return o.fail(&inputError{Flag: "-", Value: "(stdin)", Err: err})
		}
	} else if doc, err = os.ReadFile(*file); err != nil {
		return o.fail(&inputError{Flag: "--file", Value: *file, Err: err})
	}
	req := statestore.PutRequest{Namespace: c.FS.Arg(0), Key: c.FS.Arg(1), Schema: *schemaName, Document: doc, TTL: *ttl}
	switch {
	case *create:
		req.Expect = statestore.CreateOnly
	case c.FS.Changed("if-revision"):
		req.Expect = statestore.IfRevision(*ifRevision)
	}
	e, code, ok := callOnce(o, func(ctx context.Context, cl *client.Client) (statestore.Entry, error) {
		return cl.Put(ctx, req)
	})
	if !ok {
		return code
	}
	if o.json {
		return o.printJSON(entryOf(e))
	}
	if e.ExpiresMs != 0 {
		return o.printf("%s %s: revision %d, expires %s\n", e.Namespace, e.Key, e.Revision, msTime(e.ExpiresMs))
	}
	return o.printf("%s %s: revision %d\n", e.Namespace, e.Key, e.Revision)
}
