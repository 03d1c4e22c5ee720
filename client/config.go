package client

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// WebSocketPath is where kpstate serve (and ops/inspector) serve the wire
// protocol; the client appends it to every endpoint.
const WebSocketPath = "/ws"

// InfoPath is where the same servers answer Info.
const InfoPath = "/api/info"

// The defaults of Config's zero fields.
const (
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultPingInterval   = 15 * time.Second
)

// DefaultWatchBuffer is Config.WatchBuffer's default: the store's default
// bound on one watch's unacknowledged updates (quota.Limits.MaxUnackedUpdates,
// which a test holds equal).
const DefaultWatchBuffer = 32

// maxMessageBytes bounds one server message: a 65,536-byte snapshot or a
// 16,384-byte document many times over, and no more, so a broken server
// cannot make the client allocate without limit.
const maxMessageBytes = 1 << 20

// maxReasonBytes bounds what the client reads of a refusal's body.
const maxReasonBytes = 1 << 10

// Config configures Dial. Zero fields take the defaults.
type Config struct {
	// Endpoints are one or more server base URLs: ws://HOST:PORT or
	// wss://HOST:PORT (http:// and https:// are accepted as synonyms).
	// The client appends WebSocketPath; a URL with another path, a query
	// or a fragment is refused, naming the endpoint.
	Endpoints []string
	// Token is the bearer token, sent as "Authorization: Bearer TOKEN" on
	// every handshake and Info request.
	Token string
	// TLS configures wss:// and https:// endpoints; nil trusts the
	// system's roots.
	TLS *tls.Config
	// DialTimeout bounds one handshake (default 5 s).
	DialTimeout time.Duration
	// RequestTimeout bounds one request when its context has no earlier
	// deadline (default 10 s), and one write of a message.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delay between reconnection
	// attempts: exponential from MinBackoff, capped at MaxBackoff, with
	// full jitter (defaults 100 ms and 5 s).
	MinBackoff, MaxBackoff time.Duration
	// Logger receives connection events (connected, disconnected, failed
	// attempts); nil discards them.
	Logger *slog.Logger
	// WatchBuffer is how many updates one Watch holds that Next has not
	// returned yet (default DefaultWatchBuffer, the store's default
	// MaxUnackedUpdates). A server that lets a watch hold more
	// unacknowledged updates than this makes a watch whose reader falls
	// that far behind re-snapshot ("client buffer full"), as the server
	// itself would at its own bound.
	WatchBuffer int
	// PingInterval is how often the connection is probed with a WebSocket
	// ping (default 15 s); a ping unanswered within RequestTimeout counts
	// as a lost connection, so a silent network drop is noticed.
	PingInterval time.Duration
}

// ConfigError is a Config that cannot make a client. Nothing was dialled.
type ConfigError struct {
	Field  string // "Endpoints", "Endpoints[1]", "DialTimeout", ...
	Reason string
}

// Error names the field.
func (e *ConfigError) Error() string { return "client: Config." + e.Field + ": " + e.Reason }

// endpoint is one configured server.
type endpoint struct {
	name string // as configured
	ws   string // the WebSocket URL (ws:// or wss://, with WebSocketPath)
	http string // the base URL as http:// or https://
}

// settings is a Config with its defaults applied and its endpoints parsed.
type settings struct {
	Config
	endpoints []endpoint
}

func (cfg Config) check() (settings, error) {
	s := settings{Config: cfg}
	if len(cfg.Endpoints) == 0 {
		return s, &ConfigError{"Endpoints", "at least one server URL is required (ws://HOST:PORT or wss://HOST:PORT)"}
	}
	for i, raw := range cfg.Endpoints {
		ep, reason := parseEndpoint(raw)
		if reason != "" {
			return s, &ConfigError{fmt.Sprintf("Endpoints[%d]", i), fmt.Sprintf("%q %s", raw, reason)}
		}
		s.endpoints = append(s.endpoints, ep)
	}
	for _, b := range []byte(cfg.Token) {
		if b < 0x20 || b == 0x7f {
			return s, &ConfigError{"Token", "contains a control character; the token travels in the Authorization header"}
		}
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DialTimeout", &s.DialTimeout, DefaultDialTimeout},
		{"RequestTimeout", &s.RequestTimeout, DefaultRequestTimeout},
		{"MinBackoff", &s.MinBackoff, DefaultMinBackoff},
		{"MaxBackoff", &s.MaxBackoff, DefaultMaxBackoff},
		{"PingInterval", &s.PingInterval, DefaultPingInterval},
	}
	for _, d := range durations {
		if *d.v < 0 {
			return s, &ConfigError{d.name, fmt.Sprintf("%v is negative", *d.v)}
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if s.MinBackoff > s.MaxBackoff {
		if cfg.MinBackoff != 0 {
			return s, &ConfigError{"MinBackoff", fmt.Sprintf("%v exceeds MaxBackoff %v", s.MinBackoff, s.MaxBackoff)}
		}
		s.MinBackoff = s.MaxBackoff // only MaxBackoff was given, below the default minimum
	}
	switch {
	case cfg.WatchBuffer < 0:
		return s, &ConfigError{"WatchBuffer", fmt.Sprintf("%d is negative", cfg.WatchBuffer)}
	case cfg.WatchBuffer == 0:
		s.WatchBuffer = DefaultWatchBuffer
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// parseEndpoint returns the endpoint raw names, or why it cannot be one.
func parseEndpoint(raw string) (endpoint, string) {
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, fmt.Sprintf("is not a URL: %v", err)
	}
	var wsScheme, httpScheme string
	switch strings.ToLower(u.Scheme) {
	case "ws", "http":
		wsScheme, httpScheme = "ws", "http"
	case "wss", "https":
		wsScheme, httpScheme = "wss", "https"
	default:
		return endpoint{}, fmt.Sprintf("has scheme %q; want ws://, wss://, http:// or https://", u.Scheme)
	}
	switch {
	case u.Opaque != "" || u.Host == "":
		return endpoint{}, "names no host"
	case u.User != nil:
		return endpoint{}, "carries user information; credentials go in Config.Token"
	case u.Path != "" && u.Path != "/":
		return endpoint{}, fmt.Sprintf("has path %q; give the server's base URL (the client appends %s)", u.Path, WebSocketPath)
	case u.RawQuery != "" || u.ForceQuery:
		return endpoint{}, "has a query; give the server's base URL"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return endpoint{}, "has a fragment; give the server's base URL"
	}
	return endpoint{name: raw, ws: wsScheme + "://" + u.Host + WebSocketPath, http: httpScheme + "://" + u.Host}, ""
}
