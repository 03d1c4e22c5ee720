package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/cliflag"
)

// statusJSON is what status --json prints: api/info and the endpoint
// that answered.
type statusJSON struct {
	Endpoint string `json:"endpoint"`
	client.Info
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	_, o := newClientCommand("status", cliflag.Help{Synopsis: "[--json]",
		About: `Connects as the token's principal and prints what the server's api/info says: the endpoint that
answered, whether the store is available (and if not, why), the capabilities it advertises, the
server's version, the principal the token authenticates, and the namespaces that principal may read,
each with its revision, entries and bytes. --json prints the same as one JSON object. A wrong token
fails the handshake (exit 2, with the server's reason), which makes status the check of a token.`,
		Examples: []string{"kpstate status --endpoints wss://state.example:8765 --cacert ca.pem --token-file ops.token",
			"KPSTATE_TOKEN=$(cat alice.token) kpstate status --json"}}, stdout, stderr)
	if code := o.parse(args, 0); code >= 0 {
		return code
	}
	var endpoint string // the server that answered, one of --endpoints
	info, code, ok := callOnce(o, func(ctx context.Context, cl *client.Client) (client.Info, error) {
		info, err := cl.Info(ctx)
		endpoint = cl.Endpoint()
		return info, err
	})
	if !ok {
		return code
	}
	if o.json {
		return o.printJSON(statusJSON{Endpoint: endpoint, Info: info})
	}
	avail := "yes"
	if !info.Available {
		avail = "no: " + info.Cause
	}
	var b strings.Builder
	fmt.Fprintf(&b, "endpoint:     %s\navailable:    %s\ncapabilities: %s\nversion:      %s\nprincipal:    %s\n",
		endpoint, avail, strings.Join(info.Capabilities, ", "), info.Version, info.Principal)
	if len(info.Namespaces) == 0 {
		b.WriteString("namespaces:   none readable yet\n")
	} else {
		fmt.Fprintf(&b, "namespaces:   %d readable\n", len(info.Namespaces))
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAMESPACE\tREVISION\tENTRIES\tBYTES")
		for _, n := range info.Namespaces {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\n", n.Name, n.Revision, n.Entries, n.Bytes)
		}
		tw.Flush()
	}
	return o.printf("%s", b.String())
}
