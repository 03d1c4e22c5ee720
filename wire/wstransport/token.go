package wstransport

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/keeppeek/statestore"
)

// TokenAuthenticator accepts requests carrying one shared secret, as
// "Authorization: Bearer TOKEN" or, for browsers (whose WebSocket API
// cannot set headers), the access_token query parameter, and runs them as
// Principal. It suits a development server or a single operator; a media
// server maps its own session credentials to principals instead.
type TokenAuthenticator struct {
	Token     string
	Principal statestore.Principal
}

// ErrNoToken and ErrBadToken are the refusals of TokenAuthenticator.
var (
	ErrNoToken  = errors.New("no bearer token (Authorization: Bearer TOKEN, or ?access_token=TOKEN)")
	ErrBadToken = errors.New("the bearer token does not match")
)

// Authenticate compares the request's token with a.Token in constant time.
func (a TokenAuthenticator) Authenticate(r *http.Request) (statestore.Principal, error) {
	got := r.URL.Query().Get("access_token")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return statestore.Principal{}, ErrNoToken
		}
		got = strings.TrimSpace(tok)
	}
	switch {
	case got == "":
		return statestore.Principal{}, ErrNoToken
	case a.Token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(a.Token)) != 1:
		return statestore.Principal{}, ErrBadToken
	}
	return a.Principal, nil
}
