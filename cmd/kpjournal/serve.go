package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/keeppeek/statestore/internal/buildinfo"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/ops/inspector"
	"github.com/keeppeek/statestore/wire/wstransport"
)

const serveAbout = `Serves the inspector page for the store in DIR (created there if DIR holds none): its
namespaces, and for each one watched its entries and revisions, updating live over a WebSocket
that speaks the wire protocol, with every close reason shown. The page's client follows the
specification's watch rules (snapshot first, updates only in sequence, acknowledgements, a new
snapshot after a gap, a closure or a disconnect). Every request carries the development token,
which grants an administrator principal. It is read from --dev-token-file (its first line), or
--dev-token (visible to every user in the process list: prefer the others), else from the
environment variable KPJOURNAL_DEV_TOKEN, else a random one is made; the URL printed at start
carries it.
The server listens on loopback addresses only unless --allow-remote is given, and answers 421,
before any token is looked at, a request whose Host header is not a loopback name, the listen
address or an --allowed-host (so a page DNS rebinding pointed here cannot try one). If the store cannot be opened (another process holds its LOCK, its journal is damaged)
the page still loads, says why, and every request is answered UNAVAILABLE. Connections are budgeted:
at most --max-connections at once (default, and upper bound, what RLIMIT_NOFILE leaves after 64
descriptors kept for the store's files; one more is answered 503 naming the bound), at most 256
sessions of the principal (429), a connection that has not upgraded and sends nothing for
--idle-timeout is closed, a session with no frame, request, queued answer or watch ends after 5
minutes, a message begun must arrive whole within 10 s, and the bytes queued to all clients
together are at most 64 MiB (a session over its share is not read from until its queue drains). Stop with Ctrl-C: the WebSocket sessions end, their watches are removed,
and the store is closed.`

// servePrincipal is the administrator a development token authenticates as.
var servePrincipal = statestore.Principal{ID: "kpjournal-serve", Admin: true}

func runServe(args []string, stdout, stderr io.Writer) int {
	c := newCLI("serve", "--dir DIR [--listen ADDR] [--dev-token-file FILE] [--allow-remote [--allowed-host NAME]...]", serveAbout, []string{
		"kpjournal serve --dir /tmp/kp-demo --listen 127.0.0.1:8765",
		"kpjournal demo --dir /tmp/kp-demo && kpjournal serve --dir /tmp/kp-demo",
		"KPJOURNAL_DEV_TOKEN=$(cat dev.token) kpjournal serve --dir /tmp/kp-demo",
	}, stdout, stderr)
	c.dirFlag()
	c.jsonFlag()
	listen := c.FS.String("listen", "127.0.0.1:8765", "serve on `ADDR` (HOST:PORT; a bare :PORT is 127.0.0.1:PORT)")
	token := c.FS.String("dev-token", "", "the development token that every request must carry; visible in the process list, prefer --dev-token-file or KPJOURNAL_DEV_TOKEN (default: a random one, printed with the URL)")
	tokenFile := c.FS.String("dev-token-file", "", "read the development token from the first line of `FILE`")
	hostNames := c.FS.StringSlice("allowed-host", nil, "also serve requests whose Host header is `NAME` (a host pattern or an IP address; repeatable)")
	maxConns := c.FS.Int("max-connections", 0, "hold at most `N` connections at once (0: what RLIMIT_NOFILE leaves beside the store's descriptors, also the upper bound)")
	idle := c.FS.Duration("idle-timeout", defaultIdleTimeout, "close a connection that has not upgraded and sends no request for `D`")
	remote := c.FS.Bool("allow-remote", false, "allow a non-loopback --listen address (the token is then the only protection, sent in clear over HTTP)")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if code := c.checkDir(true); code >= 0 {
		return code
	}
	addr, err := serveAddr(*listen, *remote)
	if err != nil {
		return c.UsageError("%v", err)
	}
	if *maxConns < 0 || *idle <= 0 {
		return c.UsageError("--max-connections %d, --idle-timeout %v: want N >= 0 and a positive duration", *maxConns, *idle)
	}
	tok, err := devToken(*token, *tokenFile, os.Getenv(devTokenEnv))
	if err != nil {
		return c.UsageError("%v", err)
	}
	hosts := append([]string(nil), *hostNames...)
	if h, _, _ := net.SplitHostPort(addr); net.ParseIP(h) != nil && !net.ParseIP(h).IsUnspecified() {
		hosts = append(hosts, h) // the server named by its own address
	}
	allow, err := wstransport.NewHostAllowList(hosts, "--allowed-host")
	if err != nil {
		return c.UsageError("--allowed-host: %v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return c.Fail(exitUsage, "--listen: %v", err)
	}
	ctx, stop := stopContext()
	defer stop()
	if err := serve(ctx, ln, serveLimits{maxConns: *maxConns, idle: *idle, hosts: allow}, c.dir, tok, c.json, stdout, stderr); err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	return exitOK
}

// devTokenEnv is the environment variable kpjournal serve reads the
// development token from.
const devTokenEnv = "KPJOURNAL_DEV_TOKEN"

// devToken picks the development token: --dev-token-file's first line or
// --dev-token, else the environment's, else a random one. Giving
// both flags is refused; so is a file that cannot be read or holds no
// token.
func devToken(flag, file, env string) (string, error) {
	switch {
	case flag != "" && file != "":
		return "", errors.New("--dev-token and --dev-token-file both given: pass one (the file keeps the token out of the process list)")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--dev-token-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if tok := strings.TrimSpace(line); tok != "" {
			return tok, nil
		}
		return "", fmt.Errorf("--dev-token-file %s: its first line holds no token", file)
	case flag != "":
		return flag, nil
	case strings.TrimSpace(env) != "":
		return strings.TrimSpace(env), nil
	}
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b), nil
}

// serveAddr resolves --listen and refuses a non-loopback host unless
// remote is set.
func serveAddr(addr string, remote bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--listen %q: want HOST:PORT or :PORT: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	if !loopback && !remote {
		return "", fmt.Errorf("--listen %q is not a loopback address: the inspector grants an administrator to whoever has the token; pass --allow-remote to serve it on %s anyway", addr, host)
	}
	return net.JoinHostPort(host, port), nil
}

// defaultIdleTimeout is --idle-timeout's default: a browser keeps an idle
// HTTP connection for about as long.
const defaultIdleTimeout = 30 * time.Second

// descriptorReserve is what the connection cap leaves to the store's
// files and the process (kpstate serve keeps as many, for the same
// files): a segment being started and its directory fsync, a checkpoint
// and its temporary file, the listener, the runtime.
const descriptorReserve = 64

// serveLimits are serve's connection bounds.
type serveLimits struct {
	maxConns int           // 0: derived from RLIMIT_NOFILE
	idle     time.Duration // for connections not upgraded
	hosts    *wstransport.HostAllowList
}

// serve runs the inspector on ln until ctx ends. A store that fails to
// open is served in UNAVAILABLE mode, not refused.
func serve(ctx context.Context, ln net.Listener, lim serveLimits, dir, token string, asJSON bool, stdout, stderr io.Writer) error {
	s, openErr := statestore.Open(statestore.Options{Dir: dir})
	if openErr != nil {
		fmt.Fprintf(stderr, "kpjournal serve: the store cannot be opened, serving it UNAVAILABLE: %v\n", openErr)
		s = nil
	}
	// Measured once the store is open: its steady descriptors are then
	// among the open ones.
	d, err := wstransport.ConnectionsForDescriptors(descriptorReserve)
	if err != nil {
		if s != nil {
			s.Close()
		}
		ln.Close()
		return err
	}
	max := d.Connections
	if lim.maxConns > 0 && lim.maxConns < max {
		max = lim.maxConns
	} else if lim.maxConns > max {
		fmt.Fprintf(stderr, "kpjournal serve: --max-connections lowered from %d to %d: RLIMIT_NOFILE %d leaves no more beside the store's %d descriptors\n",
			lim.maxConns, max, d.Limit, d.Reserve)
	}
	conns, err := wstransport.NewConnBudget(max, "--max-connections")
	if err != nil {
		if s != nil {
			s.Close()
		}
		ln.Close()
		return err
	}
	ln = conns.Listen(ln, true)
	ins, err := inspector.New(inspector.Config{Store: s, Cause: openErr, Version: buildinfo.Read().String(),
		Auth: wstransport.TokenAuthenticator{Token: token, Principal: servePrincipal}})
	if err != nil {
		if s != nil {
			s.Close()
		}
		ln.Close()
		return err
	}
	// ReadHeaderTimeout also bounds a connection that sends nothing;
	// IdleTimeout one that idles after a request.
	var h http.Handler = ins
	if lim.hosts != nil {
		h = lim.hosts.Handler(ins) // before the token is looked at
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: min(lim.idle, 10*time.Second), IdleTimeout: lim.idle}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	start := serveStart{URL: fmt.Sprintf("http://%s/#token=%s", ln.Addr(), token), Store: "open"}
	if s == nil {
		start.Store, start.Cause = "unavailable", openErr.Error()
	}
	if asJSON {
		json.NewEncoder(stdout).Encode(start)
	} else {
		fmt.Fprintf(stdout, "inspector for %s (store %s): %s\n", dir, start.Store, start.URL)
	}
	var serr error
	select {
	case <-ctx.Done():
	case serr = <-served:
	}
	// Upgraded connections are not the http.Server's any more: the
	// inspector ends them, which removes their watches, before the store
	// closes.
	ins.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr == nil {
		serr = <-served
	}
	if !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if s != nil {
		err = errors.Join(err, s.Close())
	}
	if !asJSON {
		fmt.Fprintln(stdout, "inspector stopped; store closed")
	}
	return err
}

// serveStart is what serve --json prints once it listens: its one JSON
// document.
type serveStart struct {
	URL   string `json:"url"`   // the page, with the token in its fragment
	Store string `json:"store"` // "open" or "unavailable"
	Cause string `json:"cause"` // why the store is unavailable; "" when open
}
