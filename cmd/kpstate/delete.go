package main

import (
	"context"
	"io"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/cliflag"
)

// deletedJSON is what delete --json prints.
type deletedJSON struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Revision  uint64 `json:"revision"` // the namespace revision the deletion produced
}

func runDelete(args []string, stdout, stderr io.Writer) int {
	c, o := newClientCommand("delete", cliflag.Help{Synopsis: "NS KEY [--if-revision N] [--json]",
		About: `Deletes one entry and prints the namespace revision the deletion produced (watchers see a DELETE
update at that revision). --if-revision N deletes only if the key's revision is N, and fails CONFLICT
(exit 1) naming the current revision otherwise; a missing key is NOT_FOUND.`,
		Examples: []string{"kpstate delete service/transcoder-a intents/front-door-video --if-revision 7",
			"kpstate delete user/alice prefs --json"}}, stdout, stderr)
	ifRevision := c.FS.Uint64("if-revision", 0, "delete only if the key's revision is `N` (compare-and-set)")
	if code := o.parse(args, 2); code >= 0 {
		return code
	}
	req := statestore.DeleteRequest{Namespace: c.FS.Arg(0), Key: c.FS.Arg(1)}
	if c.FS.Changed("if-revision") {
		req.Expect = statestore.IfRevision(*ifRevision)
	}
	rev, code, ok := callOnce(o, func(ctx context.Context, cl *client.Client) (uint64, error) {
		return cl.Delete(ctx, req)
	})
	if !ok {
		return code
	}
	if o.json {
		return o.printJSON(deletedJSON{Namespace: req.Namespace, Key: req.Key, Revision: rev})
	}
	return o.printf("%s %s: deleted at revision %d\n", req.Namespace, req.Key, rev)
}
