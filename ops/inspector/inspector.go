// Package inspector serves the state store's inspector page: the browser
// client bundle and page (package webclient), the wire protocol over
// WebSocket at ws (package wstransport), and api/info, a JSON summary of
// the store (availability, capabilities, namespaces, the server's version)
// for the page's namespace list and for remote clients. `kpjournal serve`
// and `kpstate serve` run it; an embedder may mount it too.
//
// # Invariants
//
// Several are pinned in a real browser (TestBrowser*, which need chromium).
//
//  1. Nothing but the static page is served without credentials: api/info
//     and ws answer 401 unless the Authenticator accepts the request, and
//     api/info lists only the namespaces the principal may read.
//     Code: New, Server.info, wstransport.Handler.ServeHTTP.
//     Tests: TestInfoIsAuthenticatedAndListsOnlyReadableNamespaces.
//  2. Without a store (Config.Store nil) the page still loads, api/info says
//     why the store is unavailable and advertises no capability, and every
//     request on ws is answered UNAVAILABLE naming the cause; nothing is
//     written.
//     Code: New, Server.info, dispatch.NewUnavailable.
//     Tests: TestInfoWithoutAStoreSaysWhy, TestBrowserUnavailableStoreSaysWhy.
//  3. Close ends every WebSocket session, so the store's watches of this
//     server's sessions are gone when it returns.
//     Code: Server.Close, wstransport.Handler.Close.
//     Tests: TestCloseEndsEverySession, TestBrowserReconnectTakesANewSnapshot.
//  4. With Config.NoPage only ws and api/info are served: the page, its
//     script and the browser client answer 404, so a server that does not
//     offer the inspector exposes nothing but the protocol and its summary.
//     Code: New.
//     Tests: TestNoPageServesOnlyTheProtocol.
package inspector

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/wire/dispatch"
	"github.com/keeppeek/statestore/wire/webclient"
	"github.com/keeppeek/statestore/wire/wstransport"
)

// Config configures New.
type Config struct {
	// Store is the open store; nil serves the dispatcher in UNAVAILABLE mode
	// with Cause.
	Store *statestore.Store
	// Cause is why Store is nil (its Open error).
	Cause error
	// Auth authenticates api/info and ws. Required.
	Auth wstransport.Authenticator
	// Dispatch bounds each session.
	Dispatch dispatch.Options
	// Transport configures the WebSocket handler; its Authenticator is Auth.
	Transport wstransport.Options
	// NoPage serves only ws and api/info: no page, script or browser
	// client (a server that speaks the protocol without the inspector).
	NoPage bool
	// Version is api/info's "version": the server's build.
	Version string
}

// Server is the inspector's http.Handler.
type Server struct {
	cfg Config
	dsp *dispatch.Server
	ws  *wstransport.Handler
	mux *http.ServeMux
}

// New returns the inspector for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Auth == nil {
		return nil, &wstransport.OptionError{Field: "Authenticator", Message: "inspector.Config.Auth is required"}
	}
	s := &Server{cfg: cfg}
	if cfg.Store != nil {
		s.dsp = dispatch.New(cfg.Store, cfg.Dispatch)
	} else {
		if cfg.Cause == nil {
			s.cfg.Cause = errors.New("no store was opened")
		}
		s.dsp = dispatch.NewUnavailable(s.cfg.Cause, cfg.Dispatch)
	}
	topts := cfg.Transport
	topts.Authenticator = cfg.Auth
	ws, err := wstransport.NewHandler(s.dsp, topts)
	if err != nil {
		return nil, err
	}
	s.ws = ws
	s.mux = http.NewServeMux()
	s.mux.Handle("GET /ws", ws)
	s.mux.HandleFunc("GET /api/info", s.info)
	if cfg.NoPage {
		return s, nil
	}
	assets := http.FileServerFS(webclient.Assets())
	s.mux.Handle("GET /inspector.js", assets)
	s.mux.Handle("GET /keeppeek.mjs", assets)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(webclient.Assets(), "inspector.html")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(b)
	})
	s.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return s, nil
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The page loads only its own script and talks only to its own origin.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

// Transport returns the WebSocket handler (its Sessions count, for one).
func (s *Server) Transport() *wstransport.Handler { return s.ws }

// Dispatcher returns the dispatcher the sessions are served by (its
// QueuedBytes, for one: what an attack on memory is measured against).
func (s *Server) Dispatcher() *dispatch.Server { return s.dsp }

// Close ends every WebSocket session and refuses new ones.
func (s *Server) Close() error { return s.ws.Close() }

// Info is api/info's document.
type Info struct {
	Available    bool            `json:"available"`
	Cause        string          `json:"cause"`
	Capabilities []string        `json:"capabilities"`
	Principal    string          `json:"principal"`
	Namespaces   []NamespaceInfo `json:"namespaces"`
	Version      string          `json:"version"` // Config.Version
}

// NamespaceInfo is one namespace of Info.
type NamespaceInfo struct {
	Name     string `json:"name"`
	Revision uint64 `json:"revision"`
	Entries  int    `json:"entries"`
	Bytes    int64  `json:"bytes"`
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	p, err := s.cfg.Auth.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="keeppeek-statestore"`)
		http.Error(w, "not authenticated: "+err.Error(), http.StatusUnauthorized)
		return
	}
	info := Info{Available: s.cfg.Store != nil, Capabilities: s.dsp.Capabilities(), Principal: p.ID, Namespaces: []NamespaceInfo{},
		Version: s.cfg.Version}
	if info.Capabilities == nil {
		info.Capabilities = []string{}
	}
	if s.cfg.Store == nil {
		info.Cause = s.cfg.Cause.Error()
	} else {
		for _, n := range s.cfg.Store.Namespaces() {
			if p.MayRead(n.Name) {
				info.Namespaces = append(info.Namespaces, NamespaceInfo{n.Name, n.Revision, n.Entries, n.Bytes})
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(info)
}
