package workerproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// stopTimeout bounds what a stopping worker does before it exits: stop
// its bindings, release its leases, write its status. A store or media
// server that does not answer by then leaves the leases to their TTL.
const stopTimeout = 10 * time.Second

// Main runs one worker process with args (the command line without the
// program name): events as JSON lines on stdout, diagnostics on stderr.
// It returns the exit code: ExitOK once a SIGTERM or SIGINT has stopped
// it, ExitFailed when the store cannot be reached or refuses the token or
// a first watch, ExitUsage for a bad flag (see FlagError). A media server
// that does not answer is no reason to exit: its commands fail, are
// reported, and are retried once it answers.
func Main(args []string, stdout, stderr io.Writer) int {
	o, code := parse(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	// Installed before anything connects, so a stop asked for while the
	// worker starts is a clean stop too.
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("role", o.role)
	if err := run(ctx, o, newEmitter(stdout, o.role), log); err != nil {
		if ctx.Err() != nil {
			// Stopped while it was starting (the error is the stop's): it
			// holds nothing yet.
			fmt.Fprintf(stderr, "%s: stopped while starting\n", programName)
			return ExitOK
		}
		fmt.Fprintf(stderr, "%s: %v\n", programName, err)
		var ce *client.ConfigError
		if errors.As(err, &ce) {
			return ExitUsage // an endpoint the client refuses: nothing was dialled
		}
		return ExitFailed
	}
	return ExitOK
}

// run connects to the store and the media server as the token's principal
// and plays the role until ctx ends, then stops it.
func run(ctx context.Context, o *options, out *emitter, log *slog.Logger) error {
	c, err := client.Dial(ctx, client.Config{Endpoints: o.endpoints, Token: o.token, TLS: o.tls, MaxBackoff: o.maxBackoff,
		Logger: log.With("component", "client")})
	if err != nil {
		return err
	}
	defer c.Close()
	// The store says who the token is: the media server is reached as the
	// same principal, as KeepPeek authenticates both.
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	if !info.Available {
		return fmt.Errorf("the store at %s is unavailable: %s", c.Endpoint(), info.Cause)
	}
	m, err := mediasim.Dial(o.media, info.Principal, mediasim.RemoteOptions{OnRequestError: func(e *mediasim.RequestError) {
		log.Warn("media server request failed", "err", e)
	}})
	if err != nil {
		return err // checked by parse: not expected
	}
	defer m.Close()
	holder := o.holder
	if holder == "" {
		holder = info.Principal
	}
	out.setHolder(holder)
	out.emit(Line{Kind: KindStarted, Detail: fmt.Sprintf("principal %s on %s, media server %s", info.Principal, c.Endpoint(), o.media)})
	if o.role == RoleGroup {
		err = runGroup(ctx, o, c, m, info.Principal, out)
	} else {
		err = runReconciler(ctx, o, c, m, info.Principal, out)
	}
	if err != nil {
		return err
	}
	out.emit(Line{Kind: KindStopped, Detail: "released what it held; exiting"})
	return nil
}

// runReconciler runs a transcoder's or a viewer's reconciler on the
// client's Link until ctx ends, then Stops it: bindings first, then
// leases, so a standby takes over at once and finds the output free.
func runReconciler(ctx context.Context, o *options, c *client.Client, m *mediasim.Remote, principal string, out *emitter) error {
	r, err := reconcile.New(o.reconcileConfig(principal, m, out.event))
	if err != nil {
		return err // checked by parse with a placeholder principal: not expected
	}
	k := c.Link(reportingLink{Reconciler: r, c: c, out: out})
	defer k.Close()
	if err := r.Run(ctx, k); err != nil {
		return err
	}
	out.emit(Line{Kind: KindStopping, Detail: "ending bindings, then releasing leases"})
	stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	r.Stop(stopCtx)
	return nil
}
