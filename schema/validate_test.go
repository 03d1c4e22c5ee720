package schema_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withParams returns a valid subscribe intent carrying params, so a test
// isolates one rule.
func withParams(t *testing.T, params map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"role": "subscribe", "desired": true, "source_id": "front-door", "media_kind": "video",
		"parameters": params,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustReject checks that err is an *Error naming path and giving a reason
// containing reason, and that it matches ErrInvalid.
func mustReject(t *testing.T, err error, path, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejection at %s", path)
	}
	var e *schema.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *schema.Error", err, err)
	}
	if !errors.Is(err, schema.ErrInvalid) {
		t.Errorf("error %v does not match ErrInvalid", err)
	}
	if e.Path != path {
		t.Errorf("path = %q, want %q (error: %v)", e.Path, path, err)
	}
	if !strings.Contains(e.Reason, reason) {
		t.Errorf("reason = %q, want it to contain %q", e.Reason, reason)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("message %q does not name %s", err, path)
	}
}

func TestAcceptsFixtures(t *testing.T) {
	r := schema.NewRegistry()
	files, err := filepath.Glob("testdata/accept/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			doc, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Validate(schema.MediaIntentV1, doc); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}
}

func TestAcceptsTestdocMediaIntent(t *testing.T) {
	r := schema.NewRegistry()
	for n := range 200 {
		doc := testdoc.MediaIntent(2193, n)
		if len(doc) != 2193 {
			t.Fatalf("MediaIntent(2193, %d) is %d bytes", n, len(doc))
		}
		if err := r.Validate(schema.MediaIntentV1, doc); err != nil {
			t.Fatalf("MediaIntent(2193, %d) rejected: %v", n, err)
		}
	}
	for _, size := range []int{160, 228, 300, 1024, 4096, 16384} {
		if err := r.Validate(schema.MediaIntentV1, testdoc.MediaIntent(size, 3)); err != nil {
			t.Fatalf("MediaIntent(%d, 3) rejected: %v", size, err)
		}
	}
}

func TestRejectsFixtures(t *testing.T) {
	tests := []struct {
		file, path, reason string
	}{
		{"missing-role.json", "$.role", "missing required field"},
		{"missing-desired.json", "$.desired", "missing required field"},
		{"missing-source-id.json", "$.source_id", "missing required field"},
		{"missing-media-kind.json", "$.media_kind", "missing required field"},
		{"bad-role.json", "$.role", "must be one of publish, subscribe"},
		{"publish-without-recording-mode.json", "$.recording_mode", "publish intent requires recording_mode"},
		{"unknown-recording-mode.json", "$.recording_mode", "must be one of inherit, disabled, required"},
		{"null-recording-mode.json", "$.recording_mode", "must be one of"},
		{"source-session-id.json", "$.source_session_id", "unknown field"},
		{"rtp-mid.json", "$.rtp_mid", "unknown field"},
		{"bad-media-kind.json", "$.media_kind", "must be one of video, audio"},
		{"desired-not-boolean.json", "$.desired", "must be boolean"},
		{"source-id-bad-chars.json", "$.source_id", "does not match"},
		{"source-id-empty.json", "$.source_id", "does not match"},
		{"variant-id-bad-chars.json", "$.variant_id", "does not match"},
		{"source-id-dot-dot.json", "$.source_id", `must not be "." or ".."`},
		{"output-profile-too-long.json", "$.output_profile", "at most 128 characters"},
		{"priority-too-high.json", "$.priority", "must be <= 1000"},
		{"priority-fraction.json", "$.priority", "must be integer"},
		{"parameters-not-object.json", "$.parameters", "must be object"},
		{"parameter-not-namespaced.json", "$.parameters.scale", "field name does not match"},
		{"parameter-uppercase-namespace.json", `$.parameters["Transcoder.scale"]`, "field name does not match"},
		{"password-top-level.json", "$.password", "looks like a credential (password)"},
		{"password-in-parameters.json", "$.parameters.password", "looks like a credential (password)"},
		{"password-nested.json", `$.parameters["transcoder.upstream"]["Pass-Word"]`, "looks like a credential (password)"},
		{"api-key-namespaced.json", `$.parameters["cv.api_key"]`, "looks like a credential (apikey)"},
		{"token-in-array.json", `$.parameters["cv.zones"][1].refresh_token`, "looks like a credential (token)"},
		{"cookie-field.json", `$.parameters["http.cookie"]`, "looks like a credential (cookie)"},
		{"set-cookie-field.json", `$.parameters["http.headers"]["Set-Cookie"]`, "looks like a credential (cookie)"},
		{"authorization-field.json", `$.parameters["http.Authorization"]`, "looks like a credential (authorization)"},
		{"pem-value.json", `$.parameters["tls.cert"]`, "PEM block"},
		{"sdp-value.json", `$.parameters["webrtc.offer"]`, "raw SDP"},
		{"jpeg-data-uri.json", `$.parameters["cv.snapshot"]`, "data URI"},
		{"bearer-value.json", `$.parameters["http.header"]`, "Bearer"},
		{"duplicate-key.json", `$.parameters["cv.note"]`, "duplicate field name"},
	}
	r := schema.NewRegistry()
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			err := r.Validate(schema.MediaIntentV1, readFixture(t, filepath.Join("reject", tt.file)))
			mustReject(t, err, tt.path, tt.reason)
			var e *schema.Error
			if errors.As(err, &e) && e.Schema != schema.MediaIntentV1 {
				t.Errorf("Schema = %q", e.Schema)
			}
		})
	}
	// Every rejection fixture is covered by the table.
	files, _ := filepath.Glob("testdata/reject/*.json")
	if len(files) != len(tests) {
		t.Errorf("%d fixtures in testdata/reject, %d in the table", len(files), len(tests))
	}
}

func TestRejectsGenerated(t *testing.T) {
	b64 := strings.Repeat("QUJDRGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo0NTY3", 8)[:300]
	nested := func(levels int) any {
		var v any = "leaf"
		for range levels {
			v = map[string]any{"a": v}
		}
		return v
	}
	tests := []struct {
		name       string
		doc        []byte
		path, want string
	}{
		{"array", []byte(`[{"role":"publish"}]`), "$", "must be a JSON object, not an array"},
		{"string", []byte(`"role"`), "$", "must be a JSON object, not a string"},
		{"number", []byte(`42`), "$", "not a number"},
		{"null", []byte(`null`), "$", "not null"},
		{"invalid JSON", []byte(`{"role":"publish",}`), "$", "invalid JSON: cannot parse object"},
		{"truncated", []byte(`{"role":"publish"`), "$", "unexpected end"},
		{"empty", nil, "$", "empty document"},
		{"trailing data", []byte(`{} {}`), "$", "data after the document"},
		{"invalid UTF-8", []byte("{\"role\":\"pub\xfflish\"}"), "$", "invalid UTF-8"},
		{"base64 run 300", withParams(t, map[string]any{"cv.blob": b64}), `$.parameters["cv.blob"]`, "base64-like run of 300"},
		{"base64url run", withParams(t, map[string]any{"cv.blob": strings.Repeat("ab-_9Z", 50)}), `$.parameters["cv.blob"]`, "base64-like run"},
		{"wrapped base64", withParams(t, map[string]any{"cv.blob": strings.Repeat(strings.Repeat("A1b2", 19)+"\r\n", 4)}), `$.parameters["cv.blob"]`, "base64-like run of 304"},
		{"jpeg base64 without URI", withParams(t, map[string]any{"cv.thumb": "/9j/4AAQSkZJRgABAQAAAQ"}), `$.parameters["cv.thumb"]`, "image or file data"},
		{"png base64", withParams(t, map[string]any{"cv.thumb": "iVBORw0KGgoAAAANSUhEUgAA"}), `$.parameters["cv.thumb"]`, "image or file data"},
		{"basic credentials", withParams(t, map[string]any{"http.header": "Basic dXNlcjpwYXNzd29yZA=="}), `$.parameters["http.header"]`, "Basic"},
		{"authorization header line", withParams(t, map[string]any{"http.header": "Authorization: Digest username=x"}), `$.parameters["http.header"]`, "Authorization header"},
		{"cookie header line", withParams(t, map[string]any{"http.header": "Cookie: sid=abc"}), `$.parameters["http.header"]`, "cookie"},
		{"set-cookie value", withParams(t, map[string]any{"http.header": "sid=31d4d96e407aad42; Path=/; Secure; HttpOnly"}), `$.parameters["http.header"]`, "cookie"},
		{"session cookie value", withParams(t, map[string]any{"http.header": "JSESSIONID=ABC123"}), `$.parameters["http.header"]`, "cookie"},
		{"nesting 33", withParams(t, map[string]any{"cv.deep": nested(31)}), `$.parameters["cv.deep"]` + strings.Repeat(".a", 30), "nesting deeper than 32"},
		{"escaped PEM", []byte(`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"tls.key":"\u002d----BEGIN RSA PRIVATE KEY-----"}}`), `$.parameters["tls.key"]`, "PEM"},
		{"escaped field name", []byte(`{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{"p\u0061ssword":"x"}}`), "$.parameters.password", "credential"},
		{"base64 as field name", withParams(t, map[string]any{"cv." + b64: 1}), `$.parameters["cv.` + b64[:61] + `..."]`, "field name contains a base64-like run"},
	}
	r := schema.NewRegistry()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustReject(t, r.Validate(schema.MediaIntentV1, tt.doc), tt.path, tt.want)
		})
	}
	// One level shallower is fine.
	if err := r.Validate(schema.MediaIntentV1, withParams(t, map[string]any{"cv.deep": nested(30)})); err != nil {
		t.Errorf("nesting 32 rejected: %v", err)
	}
}

func TestErrorMessage(t *testing.T) {
	err := schema.NewRegistry().Validate(schema.MediaIntentV1, readFixture(t, "reject/publish-without-recording-mode.json"))
	const want = "schema keeppeek.media-intent.v1: $.recording_mode: publish intent requires recording_mode"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestMultipleProblemsReportedDeterministically(t *testing.T) {
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

func TestUnknownSchema(t *testing.T) {
	r := schema.NewRegistry()
	doc := readFixture(t, "accept/spec-example.json")
	for _, name := range []string{"keeppeek.media-intent.v2", "keeppeek.other.v1", "media-intent", ""} {
		err := r.Validate(name, doc)
		if !errors.Is(err, schema.ErrUnknownSchema) || !errors.Is(err, schema.ErrInvalid) {
			t.Errorf("Validate(%q) = %v; want ErrUnknownSchema and ErrInvalid", name, err)
		}
		var e *schema.Error
		if !errors.As(err, &e) || e.Path != "schema" {
			t.Errorf("Validate(%q) = %v; want *Error at path schema", name, err)
		}
	}
	var zero schema.Registry
	if err := zero.Validate(schema.MediaIntentV1, doc); !errors.Is(err, schema.ErrUnknownSchema) {
		t.Errorf("zero Registry: %v", err)
	}
}

func TestCheckName(t *testing.T) {
	good := []string{
		"keeppeek.media-intent.v1", "keeppeek.a.v1", "keeppeek.a.b-c.d9.v12", "keeppeek.0.v9",
		"keeppeek.v1.v2", "keeppeek.-.v1", "keeppeek.observed-status.v1000",
		"keeppeek." + strings.Repeat("a", 128-len("keeppeek..v1")) + ".v1",
	}
	bad := []string{
		"", "keeppeek", "keeppeek.v1", "keeppeek..v1", "keeppeek.a..b.v1", "keeppeek..a.v1",
		"keeppeek.a.v0", "keeppeek.a.v01", "keeppeek.a.v", "keeppeek.a.1", "keeppeek.a.V1",
		"keeppeek.a.v-1", "keeppeek.a.v1x", "keeppeek.a.v1.", "keeppeek.A.v1", "keeppeek.a_b.v1",
		"keeppeek.a b.v1", "keeppeek.ä.v1", "Keeppeek.a.v1", "other.a.v1", ".keeppeek.a.v1",
		"keeppeek.a.v1 ", "keeppeek.a/b.v1",
		"keeppeek." + strings.Repeat("a", 129-len("keeppeek..v1")) + ".v1",
	}
	for _, n := range good {
		if err := schema.CheckName(n); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range bad {
		err := schema.CheckName(n)
		var e *schema.Error
		if !errors.As(err, &e) || e.Path != "schema" {
			t.Errorf("CheckName(%q) = %v, want *Error at path schema", n, err)
		}
	}
}

type rejectAll struct{ err error }

func (v rejectAll) Validate(map[string]any) error { return v.err }

func TestRegister(t *testing.T) {
	r := schema.NewRegistry()
	v, err := schema.NewJSONSchemaValidator("keeppeek.observed-status.v1", []byte(`{
		"type": "object", "required": ["state"], "additionalProperties": false,
		"properties": {"state": {"enum": ["running", "stopped"]}, "detail": {"type": "string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register("keeppeek.observed-status.v1", v); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("keeppeek.observed-status.v1", v); err == nil {
		t.Error("duplicate Register accepted")
	}
	if err := r.Register(schema.MediaIntentV1, v); err == nil {
		t.Error("Register over the built-in schema accepted")
	}
	if err := r.Register("observed-status", v); err == nil {
		t.Error("Register with a bad name accepted")
	}
	if err := r.Register("keeppeek.nil.v1", nil); err == nil {
		t.Error("Register of a nil validator accepted")
	}
	if err := r.Register("keeppeek.plain-error.v1", rejectAll{errors.New("nope")}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("keeppeek.schema-error.v1", rejectAll{&schema.Error{Path: "$.x", Reason: "bad x"}}); err != nil {
		t.Fatal(err)
	}

	want := []string{"keeppeek.media-intent.v1", "keeppeek.observed-status.v1", "keeppeek.plain-error.v1", "keeppeek.schema-error.v1"}
	if got := r.Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Names() = %v, want %v", got, want)
	}

	if err := r.Validate("keeppeek.observed-status.v1", []byte(`{"state":"running","detail":"ok"}`)); err != nil {
		t.Errorf("valid observed-status rejected: %v", err)
	}
	mustReject(t, r.Validate("keeppeek.observed-status.v1", []byte(`{"state":"paused"}`)), "$.state", "must be one of running, stopped")
	// The guard applies to registered schemas too, before their validator.
	mustReject(t, r.Validate("keeppeek.observed-status.v1", []byte(`{"state":"running","secret":"s"}`)), "$.secret", "credential")

	err = r.Validate("keeppeek.plain-error.v1", []byte(`{}`))
	mustReject(t, err, "$", "nope")
	var e *schema.Error
	if errors.As(err, &e) && e.Schema != "keeppeek.plain-error.v1" {
		t.Errorf("Schema = %q", e.Schema)
	}
	err = r.Validate("keeppeek.schema-error.v1", []byte(`{}`))
	if err == nil || err.Error() != "schema keeppeek.schema-error.v1: $.x: bad x" {
		t.Errorf("got %v", err)
	}
}

func TestNewJSONSchemaValidatorErrors(t *testing.T) {
	for name, src := range map[string]string{
		"not JSON":          `{"type": }`,
		"external ref":      `{"$ref": "https://example.com/schema.json"}`,
		"file ref":          `{"$ref": "file:///etc/hostname"}`,
		"invalid keyword":   `{"type": "objekt"}`,
		"invalid regexp":    `{"pattern": "("}`,
		"not a schema type": `42`,
	} {
		if _, err := schema.NewJSONSchemaValidator("keeppeek.x.v1", []byte(src)); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
}

func TestGuardNames(t *testing.T) {
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
	deep := any("x")
	for range 33 {
		deep = []any{deep}
	}
	mustReject(t, schema.Guard(deep), "$"+strings.Repeat("[0]", 32), "nesting deeper than 32")
	mustReject(t, schema.Guard(map[string]any{"n": make(chan int)}), "$", "not a JSON value")
	for _, v := range []any{nil, true, json.Number("1"), 1.5, "s", []any{}, map[string]any{}} {
		if err := schema.Guard(v); err != nil {
			t.Errorf("Guard(%v) = %v", v, err)
		}
	}
	if err := schema.Guard(map[string]any{"password": 1}); err != nil && err.Error() != "$.password: field name looks like a credential (password)" {
		t.Errorf("message without schema: %q", err)
	}
}
