package wstransport

import (
	"fmt"
	"net"
	"net/http"
	"path"
	"strings"
)

// HostAllowList admits a request by its Host header, before anything else
// looks at it: a page that DNS rebinding pointed at the server carries
// its own site's name in Host, so it is answered 421 (Misdirected
// Request) before it can try a token. Loopback names (localhost and
// loopback IP literals) are always allowed; so are the listed patterns
// (path.Match over the host without its port, case-insensitive) and the
// listed IP literals.
type HostAllowList struct {
	patterns []string
	name     string // the configuration's name for the list, for refusals
}

// NewHostAllowList checks patterns; name is the list as the operator
// configures it ("allowed_hosts", "--allowed-host").
func NewHostAllowList(patterns []string, name string) (*HostAllowList, error) {
	l := &HostAllowList{name: name}
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil || p == "" || strings.ContainsAny(p, "/:") && net.ParseIP(p) == nil {
			return nil, &OptionError{Field: "AllowedHosts", Message: fmt.Sprintf("%q is not a host name pattern or an IP address (%s)", p, name)}
		}
		l.patterns = append(l.patterns, strings.ToLower(p))
	}
	return l, nil
}

// Allows reports whether a request with this Host header is admitted.
func (l *HostAllowList) Allows(hostHeader string) bool {
	host := hostHeader
	if h, _, err := net.SplitHostPort(hostHeader); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		for _, p := range l.patterns {
			if pip := net.ParseIP(p); pip != nil && pip.Equal(ip) {
				return true
			}
		}
		return false
	}
	for _, p := range l.patterns {
		if net.ParseIP(p) != nil {
			continue
		}
		if ok, _ := path.Match(p, host); ok {
			return true
		}
	}
	return false
}

// Handler returns h behind the list: a request whose Host is not allowed
// is answered 421 naming the host and the list.
func (l *HostAllowList) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.Allows(r.Host) {
			http.Error(w, (&HostError{Host: r.Host, List: l.name}).Error(), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// HostError is a request refused for its Host header.
type HostError struct {
	Host string
	List string
}

// Error names the host and the list that does not hold it.
func (e *HostError) Error() string {
	return fmt.Sprintf("wstransport: host %q is not served here (not a loopback name, and not in %s)", e.Host, e.List)
}
