package schema_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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

func TestAcceptsFixtures(t *testing.T) {
	t.Parallel()
	r := schema.NewRegistry()
	files, err := filepath.Glob("testdata/accept/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
			t.Parallel()
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
	t.Parallel()
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
		{"invalid JSON", []byte(`{"role":"publish",}`), "$", "invalid JSON at byte 18"},
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
			t.Parallel()
			mustReject(t, r.Validate(schema.MediaIntentV1, tt.doc), tt.path, tt.want)
		})
	}
	// One level shallower is fine.
	if err := r.Validate(schema.MediaIntentV1, withParams(t, map[string]any{"cv.deep": nested(30)})); err != nil {
		t.Errorf("nesting 32 rejected: %v", err)
	}
}
