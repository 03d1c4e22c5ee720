package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/cliflag"
)

func runGet(args []string, stdout, stderr io.Writer) int {
	c, o := newClientCommand("get", cliflag.Help{Synopsis: "NS KEY [--json]",
		About: `Reads one entry and prints it: its namespace, key, schema, owner (the principal that wrote the
current document), revision, when it was created and last updated and when its lease expires (times in
UTC, to the millisecond), its size, and then the document, indented. --json prints one JSON object
with the same fields and the document embedded as JSON. A missing key is NOT_FOUND (exit 1), a
namespace the principal may not read PERMISSION_DENIED.`,
		Examples: []string{"kpstate get service/transcoder-a intents/front-door-video --token-file ops.token",
			"kpstate get user/alice groups --json | jq .document"}}, stdout, stderr)
	if code := o.parse(args, 2); code >= 0 {
		return code
	}
	e, code, ok := callOnce(o, func(ctx context.Context, cl *client.Client) (statestore.Entry, error) {
		return cl.Get(ctx, c.FS.Arg(0), c.FS.Arg(1))
	})
	if !ok {
		return code
	}
	if o.json {
		return o.printJSON(entryOf(e))
	}
	doc := e.Document
	var pretty bytes.Buffer
	if json.Indent(&pretty, e.Document, "", "  ") == nil {
		doc = bytes.TrimSpace(pretty.Bytes()) // Indent keeps a trailing newline the writer sent
	}
	return o.printf("namespace: %s\nkey:       %s\nschema:    %s\nowner:     %s\nrevision:  %d\ncreated:   %s\nupdated:   %s\nexpires:   %s\nsize:      %d bytes\n\n%s\n",
		e.Namespace, e.Key, e.Schema, e.Owner, e.Revision, msTime(e.CreatedMs), msTime(e.UpdatedMs), expiresText(e.ExpiresMs), len(e.Document), doc)
}
