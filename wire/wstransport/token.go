package wstransport

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/keeppeek/statestore"
)

// TokenAuthenticator accepts requests carrying one shared secret, as
// "Authorization: Bearer TOKEN" or, for browsers (whose WebSocket API
// cannot set headers), the access_token query parameter, and runs them as
// Principal. It suits a development server or a single operator; a server
// with several principals uses a PrincipalTable, and a media server maps
// its own session credentials to principals instead.
type TokenAuthenticator struct {
	Token     string
	Principal statestore.Principal
}

// ErrNoToken, ErrBadToken and ErrUnknownToken are the refusals of
// TokenAuthenticator and PrincipalTable; none holds the token.
var (
	ErrNoToken      = errors.New("no bearer token (Authorization: Bearer TOKEN, or ?access_token=TOKEN)")
	ErrBadToken     = errors.New("the bearer token does not match")
	ErrUnknownToken = errors.New("the token matches no principal of this server")
)

// bearerToken returns the request's token: the Authorization header's
// Bearer credentials, else the access_token query parameter.
func bearerToken(r *http.Request) (string, error) {
	got := r.URL.Query().Get("access_token")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", ErrNoToken
		}
		got = strings.TrimSpace(tok)
	}
	if got == "" {
		return "", ErrNoToken
	}
	return got, nil
}

// Authenticate compares the request's token with a.Token in constant time.
func (a TokenAuthenticator) Authenticate(r *http.Request) (statestore.Principal, error) {
	got, err := bearerToken(r)
	if err != nil {
		return statestore.Principal{}, err
	}
	if a.Token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(a.Token)) != 1 {
		return statestore.Principal{}, ErrBadToken
	}
	return a.Principal, nil
}

// TokenHash is the SHA-256 of a bearer token: what a PrincipalTable and a
// server's configuration hold instead of the token, so neither a config
// file nor a memory dump gives a token away.
type TokenHash [sha256.Size]byte

// HashToken returns token's TokenHash.
func HashToken(token string) TokenHash { return sha256.Sum256([]byte(token)) }

// ErrBadTokenHash is wrapped by ParseTokenHash's refusals.
var ErrBadTokenHash = errors.New("want 64 lowercase hexadecimal digits, the SHA-256 of the token")

// ParseTokenHash reads the form String writes: 64 lowercase hexadecimal
// digits. Upper case is refused so that a hash has one spelling, and two
// entries cannot hold the same hash unnoticed.
func ParseTokenHash(s string) (TokenHash, error) {
	var h TokenHash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("%w: got %d characters", ErrBadTokenHash, len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return h, fmt.Errorf("%w: character %d is %q", ErrBadTokenHash, i+1, c)
		}
	}
	hex.Decode(h[:], []byte(s))
	return h, nil
}

// String returns the hash as 64 lowercase hexadecimal digits.
func (h TokenHash) String() string { return hex.EncodeToString(h[:]) }

// TokenPrincipal is one entry of a PrincipalTable: the principal a token
// with this hash authenticates as.
type TokenPrincipal struct {
	Hash      TokenHash
	Principal statestore.Principal
}

// PrincipalTable is an Authenticator over a set of principals, each with
// its own bearer token, known only by its TokenHash: a request's token
// (as for TokenAuthenticator, the Authorization header or access_token)
// is hashed and looked up. Lookup by the hash of the secret leaks nothing
// of the secret through timing, so no constant-time comparison is needed.
// It is safe for concurrent use; Replace swaps the whole table at once
// (a configuration reload).
type PrincipalTable struct {
	mu     sync.RWMutex
	byHash map[TokenHash]statestore.Principal
}

// PrincipalTableError is an entry Replace refused; the table is unchanged.
type PrincipalTableError struct {
	Index  int    // the entry's index in the slice given
	Field  string // "Hash" or "Principal.ID"
	Reason string
}

// Error names the entry and the field.
func (e *PrincipalTableError) Error() string {
	return fmt.Sprintf("wstransport: principal table entry %d: %s: %s", e.Index, e.Field, e.Reason)
}

// NewPrincipalTable returns a table holding entries (see Replace).
func NewPrincipalTable(entries []TokenPrincipal) (*PrincipalTable, error) {
	t := &PrincipalTable{byHash: map[TokenHash]statestore.Principal{}}
	if err := t.Replace(entries); err != nil {
		return nil, err
	}
	return t, nil
}

// Replace makes entries the table's whole content. Every principal needs
// an ID, unique in the table, and every hash must be set and unique; the
// server's own principal (statestore.System) is no token's. On error
// nothing changes: requests keep authenticating against the old table.
func (t *PrincipalTable) Replace(entries []TokenPrincipal) error {
	byHash := make(map[TokenHash]statestore.Principal, len(entries))
	ids := make(map[string]int, len(entries))
	for i, e := range entries {
		switch first, dup := ids[e.Principal.ID]; {
		case e.Principal.ID == "":
			return &PrincipalTableError{i, "Principal.ID", "empty: every token authenticates a named principal"}
		case e.Principal.IsSystem():
			return &PrincipalTableError{i, "Principal.ID", "the server's own principal is no token's"}
		case dup:
			return &PrincipalTableError{i, "Principal.ID", fmt.Sprintf("%q is already entry %d's", e.Principal.ID, first)}
		case e.Hash == TokenHash{}:
			return &PrincipalTableError{i, "Hash", "not set"}
		}
		if p, dup := byHash[e.Hash]; dup {
			return &PrincipalTableError{i, "Hash", fmt.Sprintf("also principal %q's: one token would authenticate two principals", p.ID)}
		}
		ids[e.Principal.ID] = i
		byHash[e.Hash] = e.Principal
	}
	t.mu.Lock()
	t.byHash = byHash
	t.mu.Unlock()
	return nil
}

// Principals returns the table's principals, sorted by ID.
func (t *PrincipalTable) Principals() []statestore.Principal {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ps := make([]statestore.Principal, 0, len(t.byHash))
	for _, p := range t.byHash {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b statestore.Principal) int { return strings.Compare(a.ID, b.ID) })
	return ps
}

// Authenticate returns the principal of the request's token:
// ErrNoToken without one, ErrUnknownToken when its hash is in no entry.
func (t *PrincipalTable) Authenticate(r *http.Request) (statestore.Principal, error) {
	tok, err := bearerToken(r)
	if err != nil {
		return statestore.Principal{}, err
	}
	h := HashToken(tok)
	t.mu.RLock()
	p, ok := t.byHash[h]
	t.mu.RUnlock()
	if !ok {
		return statestore.Principal{}, ErrUnknownToken
	}
	return p, nil
}
