package workerproc

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/keeppeek/statestore/client"
	"github.com/keeppeek/statestore/internal/cliflag"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/worker/grouppref"
	"github.com/keeppeek/statestore/worker/lease"
	"github.com/keeppeek/statestore/worker/mediasim"
	"github.com/keeppeek/statestore/worker/reconcile"
)

// The roles a worker process plays (--role).
const (
	// RoleTranscoder is scenario 4's transcoder: it follows the publish
	// intents of a service namespace and acts on one only while it holds
	// its lease; a second process with another --holder stands by.
	RoleTranscoder = "transcoder"
	// RoleViewer is scenario 5's viewer: it follows its owner's
	// subscription intents and subscribes once the variant is ready.
	RoleViewer = "viewer"
	// RoleGroup is scenario 6's group client: it keeps its owner's
	// preferred group under user/<owner>/ and joins the group it names.
	RoleGroup = "group"
)

// Exit codes of Main.
const (
	ExitOK     = 0 // stopped by SIGTERM or SIGINT, after releasing what it held
	ExitFailed = 1 // the store could not be reached, refused the token or a first watch; the media server is not asked yet
	ExitUsage  = cliflag.ExitUsage
)

// programName is the worker in its messages and help.
const programName = "kpworker"

// placeholder stands for the principal while the flags are checked,
// before the store has said who the token is: the defaults derived from
// the principal are never empty, so the checks come out the same.
const placeholder = "principal"

// FlagError is a flag, or the file it names, that cannot run a worker.
// Nothing was connected to and nothing changed.
type FlagError struct {
	Flag   string // "--role", "--token-file", ...
	Reason string
	Err    error // the cause (a file that cannot be read), when there is one
}

// Error names the flag and the reason.
func (e *FlagError) Error() string { return e.Flag + ": " + e.Reason }

// Unwrap returns the cause.
func (e *FlagError) Unwrap() error { return e.Err }

// options is a worker's command line, checked, with its files read.
type options struct {
	role         string
	endpoints    []string
	tokenFile    string
	caFile       string
	media        string
	holder       string // "": the principal
	namespace    string // "": user/<principal> (viewer)
	intentPrefix string
	leasePrefix  string
	leaseTTL     time.Duration
	maxBackoff   time.Duration
	prefer       string

	token string
	tls   *tls.Config // nil: the system's roots
	reg   *schema.Registry
}

const about = `A KeepPeek worker as its own process: it reaches a state-store server (kpstate serve) through the
typed Go client as the principal its token authenticates, and the simulated media server (worker/mediasim's
HTTP API) at --media as that same principal. --role transcoder follows the publish intents under
--intent-prefix (intents/) of --namespace and acts on one only while it holds its lease under --lease-prefix
(leases/), renewed every third of --lease-ttl; several transcoders with different --holder IDs share a
namespace, one active and the others standing by. --role viewer follows the subscription intents under
--intent-prefix (subscriptions/) of --namespace (user/<principal>) and subscribes to a variant once it is
ready. --role group keeps the principal's preferred group (--prefer) in user/<principal>/preferences/group and
joins the group the stored preference names, whoever wrote it. Each event is one JSON line on stdout (time,
role, holder, kind, intent, detail, error); diagnostics go to stderr. The worker reconnects by itself,
re-snapshots and reconciles after a lost connection. SIGTERM or SIGINT stops it: its bindings stopped, its
leases released (so a standby takes over at once), its connections closed, exit 0. SIGKILL leaves its
leases to lapse by their TTL.`

// parse reads and checks the command line; a non-negative code means
// Main returns it at once (0 after --help).
func parse(args []string, stdout, stderr io.Writer) (*options, int) {
	o := &options{}
	fs := pflag.NewFlagSet(programName, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.StringVar(&o.role, "role", "", "what the worker does: `ROLE` transcoder, viewer or group (required)")
	fs.StringSliceVar(&o.endpoints, "endpoints", nil, "the state-store server's base `URLs`, ws://HOST:PORT or wss://HOST:PORT, comma-separated (required)")
	fs.StringVar(&o.tokenFile, "token-file", "", "the `FILE` holding the principal's bearer token (kpstate token new's first line; required)")
	fs.StringVar(&o.caFile, "cacert", "", "PEM `FILE` of the certificate authorities to trust for wss:// (default: the system's)")
	fs.StringVar(&o.media, "media", "", "the media server's HTTP API base `URL` (worker/mediasim's Handler; required)")
	fs.StringVar(&o.holder, "holder", "", "this worker instance's `ID`, in its leases and status keys (default: the principal)")
	fs.StringVar(&o.namespace, "namespace", "", "the `NAMESPACE` of the intents, leases and status (transcoder: required; viewer: user/<principal>)")
	fs.StringVar(&o.intentPrefix, "intent-prefix", "", "the intents to follow, a key `PREFIX` (transcoder: intents/; viewer: subscriptions/)")
	fs.StringVar(&o.leasePrefix, "lease-prefix", "leases/", "where a transcoder's leases live, a key `PREFIX`")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", lease.DefaultTTL, "a transcoder's lease `TTL`, at least 1s: a standby takes over this long after the holder died")
	fs.DurationVar(&o.maxBackoff, "max-backoff", client.DefaultMaxBackoff, "the longest `WAIT` between reconnection attempts to the state store")
	fs.StringVar(&o.prefer, "prefer", "", "a group client's preferred `GROUP`, saved under user/<principal>/ on start (default: keep what is stored)")
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: %s --role ROLE --endpoints URL --token-file FILE --media URL [flags]\n\n", programName)
		fmt.Fprintln(stdout, cliflag.Wrap(about, 78))
		fmt.Fprintln(stdout, "\nExamples:")
		fmt.Fprintln(stdout, "  "+programName+" --role transcoder --endpoints wss://127.0.0.1:8765 --cacert ca.pem --token-file t1.token \\\n      --media http://127.0.0.1:9000 --namespace service/transcoder-a --holder transcoder-1 --lease-ttl 2s")
		fmt.Fprintln(stdout, "  "+programName+" --role viewer --endpoints ws://127.0.0.1:8765 --token-file alice.token --media http://127.0.0.1:9000 --holder alice-browser")
		fmt.Fprintln(stdout, "  "+programName+" --role group --endpoints ws://127.0.0.1:8765 --token-file bob.token --media http://127.0.0.1:9000 --prefer team-blue")
		fmt.Fprintln(stdout, "\nFlags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
		fmt.Fprintln(stdout, "\nExit codes: 0 stopped by SIGTERM or SIGINT, 1 the store unreachable, or it refused the token or a first watch, 2 usage")
	}
	usage := func(err error) (*options, int) {
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", programName, err, programName)
		return nil, ExitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, ExitOK
		}
		return usage(err)
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected argument %q: every setting is a flag", fs.Arg(0)))
	}
	if err := o.check(fs); err != nil {
		return usage(err)
	}
	return o, -1
}

// check validates the options, reads the token and CA files, and builds
// the role's configuration once with a placeholder principal, so what
// the worker would refuse after connecting is refused before.
func (o *options) check(fs *pflag.FlagSet) error {
	only := func(flag string, roles ...string) error {
		for _, r := range roles {
			if o.role == r {
				return nil
			}
		}
		if fs.Changed(flag) {
			return &FlagError{Flag: "--" + flag, Reason: fmt.Sprintf("not used by --role %s (only by %s)", o.role, strings.Join(roles, ", "))}
		}
		return nil
	}
	switch {
	case o.role == "":
		return &FlagError{Flag: "--role", Reason: "required: transcoder, viewer or group"}
	case o.role != RoleTranscoder && o.role != RoleViewer && o.role != RoleGroup:
		return &FlagError{Flag: "--role", Reason: fmt.Sprintf("%q: want transcoder, viewer or group", o.role)}
	case len(o.endpoints) == 0:
		return &FlagError{Flag: "--endpoints", Reason: "required: the server's ws:// or wss:// base URL"}
	case o.tokenFile == "":
		return &FlagError{Flag: "--token-file", Reason: "required: the file holding the principal's token"}
	case o.media == "":
		return &FlagError{Flag: "--media", Reason: "required: the media server's HTTP API base URL"}
	case o.role == RoleTranscoder && o.namespace == "":
		return &FlagError{Flag: "--namespace", Reason: "required with --role transcoder: the service namespace of the intents and leases (service/...)"}
	case o.maxBackoff <= 0:
		return &FlagError{Flag: "--max-backoff", Reason: fmt.Sprintf("%v: want a positive duration", o.maxBackoff)}
	}
	for _, rule := range []struct {
		flag  string
		roles []string
	}{
		{"namespace", []string{RoleTranscoder, RoleViewer}},
		{"intent-prefix", []string{RoleTranscoder, RoleViewer}},
		{"lease-prefix", []string{RoleTranscoder}},
		{"lease-ttl", []string{RoleTranscoder}},
		{"prefer", []string{RoleGroup}},
	} {
		if err := only(rule.flag, rule.roles...); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(o.tokenFile)
	if err != nil {
		return &FlagError{Flag: "--token-file", Reason: err.Error(), Err: err}
	}
	if o.token = strings.TrimSpace(string(b)); o.token == "" {
		return &FlagError{Flag: "--token-file", Reason: o.tokenFile + " is empty: want the token on its first line"}
	}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return &FlagError{Flag: "--cacert", Reason: err.Error(), Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return &FlagError{Flag: "--cacert", Reason: o.caFile + " holds no PEM certificate"}
		}
		o.tls = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if o.reg, err = cliflag.Registry(); err != nil {
		return err
	}
	// Dial sends nothing: it checks the URL as the real dial will.
	probe, err := mediasim.Dial(o.media, placeholder, mediasim.RemoteOptions{})
	if err != nil {
		return &FlagError{Flag: "--media", Reason: err.Error(), Err: err}
	}
	defer probe.Close()
	switch o.role {
	case RoleGroup:
		if o.prefer != "" {
			doc, err := json.Marshal(grouppref.Preferences{PreferredGroup: o.prefer})
			if err == nil {
				_, err = grouppref.Parse(o.reg, doc)
			}
			if err != nil {
				return &FlagError{Flag: "--prefer", Reason: err.Error(), Err: err}
			}
		}
		return nil
	case RoleTranscoder:
		if o.leasePrefix == "" {
			return &FlagError{Flag: "--lease-prefix", Reason: "empty: a transcoder acts only under a lease"}
		}
		// The lease a publish intent gets is built when the intent first
		// shows up: check its timing now, as lease.New will.
		cfg := o.reconcileConfig(placeholder, probe, nil)
		if _, err := lease.New(nil, o.reg, lease.Config{Namespace: cfg.Namespace, Key: cfg.LeasePrefix + "check", Holder: cfg.Holder, TTL: o.leaseTTL}); err != nil {
			return &FlagError{Flag: "--lease-ttl", Reason: err.Error(), Err: err}
		}
	}
	if _, err := reconcile.New(o.reconcileConfig(placeholder, probe, nil)); err != nil {
		var ce *reconcile.ConfigError
		if errors.As(err, &ce) {
			// The status prefix is fixed, so an overlap with it is the
			// intent prefix's fault.
			reason := ce.Reason
			if ce.Field == "status_prefix" {
				reason = "overlaps the prefix the worker writes its status under: " + reason
			}
			flag := map[string]string{"namespace": "--namespace", "holder": "--holder", "status_prefix": "--intent-prefix", "lease_prefix": "--lease-prefix"}[ce.Field]
			if flag != "" {
				return &FlagError{Flag: flag, Reason: reason, Err: err}
			}
		}
		return err
	}
	return nil
}

// reconcileConfig is the reconciler a transcoder or viewer runs as
// principal, reaching the media server through m.
func (o *options) reconcileConfig(principal string, m *mediasim.Remote, observe func(reconcile.Event)) reconcile.Config {
	cfg := reconcile.Config{Namespace: o.namespace, IntentPrefix: o.intentPrefix, Holder: o.holder,
		Schemas: o.reg, Capabilities: m, Media: m, Observe: observe}
	if cfg.Holder == "" {
		cfg.Holder = principal
	}
	switch o.role {
	case RoleTranscoder:
		cfg.LeasePrefix = o.leasePrefix
		cfg.Lease = lease.Config{TTL: o.leaseTTL}
		if cfg.IntentPrefix == "" {
			cfg.IntentPrefix = "intents/"
		}
	case RoleViewer:
		if cfg.Namespace == "" {
			cfg.Namespace = "user/" + principal
		}
		if cfg.IntentPrefix == "" {
			cfg.IntentPrefix = "subscriptions/"
		}
	}
	return cfg
}
