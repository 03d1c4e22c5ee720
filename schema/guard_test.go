package schema_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/schema"
)

func TestGuardNames(t *testing.T) {
	t.Parallel()
	rejected := []string{
		"password", "PASSWORD", "db_password", "Passwd", "pwd", "db-pwd", "pass", "passphrase",
		"secret", "client_secret", "session_secret", "SecretKey", "secret_key",
		"token", "access_token", "refreshToken", "X-Auth-Token", "id.token", "tokens_per_second",
		"api_key", "apiKey", "API-KEY", "x_api_key", "access_key", "AccessKeyId", "private_key", "privateKey",
		"cookie", "Set-Cookie", "cookies", "authorization", "Proxy-Authorization", "auth", "basic_auth", "auth_header",
		"credential", "credentials", "bearer", "jwt",
		"pa\u017f\u017fword", // long s folds to s
		"api\u212aey",        // Kelvin sign folds to k
	}
	accepted := []string{
		"author", "authority", "authors", "co-author", "keyframe_interval", "bypass", "passthrough",
		"compass", "recording_mode", "source_id", "session", "key", "monkey", "tok",
	}
	for _, n := range rejected {
		mustReject(t, schema.Guard(map[string]any{n: json.Number("1")}), pathOf(n), "credential")
	}
	for _, n := range accepted {
		if err := schema.Guard(map[string]any{n: json.Number("1")}); err != nil {
			t.Errorf("Guard rejected field %q: %v", n, err)
		}
	}
}

// pathOf is the JSON path of a top-level member: dot notation for plain
// identifiers, Go-quoted brackets otherwise.
func pathOf(key string) string {
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return "$[" + strconv.Quote(key) + "]"
		}
	}
	return "$." + key
}

func TestGuardValues(t *testing.T) {
	t.Parallel()
	rejected := map[string]string{
		"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n": "PEM",
		"v=0\no=- 0 0 IN IP4 127.0.0.1\ns=-\n":                            "SDP",
		"header\nv=0\r\nm=audio 9 RTP/AVP 0\r\n":                          "SDP",
		"DATA:image/png;BASE64,iVBORw0KGgo=":                              "data URI",
		"see data:application/octet-stream;base64,AAAA":                   "data URI",
		"R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7":        "image or file data",
		"JVBERi0xLjQKJcOkw7zDtsOfCjIgMCBvYmoK":                            "image or file data",
		strings.Repeat("0123456789abcdef", 16):                            "base64-like run of 256",
		"bearer abcdefgh1234":                                             "Bearer",
		"curl -H 'Authorization: Bearer x.y.z0123'":                       "Bearer",
		"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==":                              "Basic",
		"  cookie: a=b; c=d":                                              "cookie",
		"__Host-session=abc":                                              "cookie",
		"id=a3fWa; Expires=Thu, 21 Oct 2021 07:28:00 GMT":                 "cookie",
	}
	accepted := []string{
		"", "short", "v=0", "x v=0\nm=1", "Basic settings", "basic authentication is off",
		"the Bearer of news", "bearer responsibility", "bearer tokens are not allowed here",
		strings.Repeat("0123456789abcdef", 15) + "0123456789abcde",
		strings.Repeat("word ", 500),
		"https://example.com/a/b/c?x=1&y=2", "a=b; c=d", "key=value; other=thing",
		"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"/9j/", "front-door-----END", "--- BEGIN notes ---",
	}
	for v, want := range rejected {
		mustReject(t, schema.Guard(map[string]any{"v": v}), "$.v", want)
	}
	for _, v := range accepted {
		if err := schema.Guard(map[string]any{"v": v, "list": []any{v, map[string]any{"x": v}}}); err != nil {
			t.Errorf("Guard rejected %.40q: %v", v, err)
		}
	}
}

func TestGuardShapes(t *testing.T) {
	t.Parallel()
	deep := any("x")
	for range 33 {
		deep = []any{deep}
	}
	mustReject(t, schema.Guard(deep), "$"+strings.Repeat("[0]", 32), "nesting deeper than 32")
	mustReject(t, schema.Guard(map[string]any{"n": 3}), "$.n", "int is not a JSON value")
	for _, v := range []any{nil, true, json.Number("1"), 1.5, "s", []any{}, map[string]any{}} {
		if err := schema.Guard(v); err != nil {
			t.Errorf("Guard(%v) = %v", v, err)
		}
	}
	if err := schema.Guard(map[string]any{"password": 1}); err == nil || err.Error() != "$.password: field name looks like a credential (password)" {
		t.Errorf("message without schema: %v", err)
	}
}

func TestMultipleProblemsReportedDeterministically(t *testing.T) {
	t.Parallel()
	doc := withParams(t, map[string]any{"a.password": "x", "b.secret": "y", "c.token": "z"})
	r := schema.NewRegistry()
	for range 20 {
		mustReject(t, r.Validate(schema.MediaIntentV1, doc), `$.parameters["a.password"]`, "password")
	}
	doc = []byte(`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","zz":1,"rtp_mid":"1","mm":2}`)
	for range 20 {
		mustReject(t, r.Validate(schema.MediaIntentV1, doc), "$.mm", "unknown field")
	}
}
