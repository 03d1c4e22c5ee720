package fuzz

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
)

// maxDocument is the store's document bound (quota.Default), checked at
// admission before the schema runs.
const maxDocument = 16384

// FuzzDocumentValidate fuzzes schema.NewRegistry().Validate under
// keeppeek.media-intent.v1 (its raw fast path and its full path alike).
//
// Properties:
//
//  1. Validate never panics, gives the same verdict twice, and refuses only
//     with a *schema.Error matching schema.ErrInvalid.
//  2. What it accepts, checked here independently of package schema:
//     valid UTF-8; exactly one JSON value, an object, that encoding/json
//     (UseNumber) decodes with nothing after it; no duplicate member name
//     in any object and nesting at most 32 deep (checked on encoding/json's
//     token stream, after unescaping); schema.Guard passes on encoding/json's
//     decoding (the reading every consumer will have); the media-intent
//     rules (only the known top-level members; role publish|subscribe,
//     desired a boolean, source_id and the other identifiers 1-128 of
//     [A-Za-z0-9._-] but not "." or "..", media_kind video|audio, priority
//     an integer 0-1000, recording_mode inherit|disabled|required and
//     present for publish, parameters an object of namespaced names); and
//     no forbidden content in any member name or string (a strict subset of
//     the guard, re-implemented: credential-like names, PEM blocks, base64
//     data URIs, base64 runs of 256+, image signatures in base64, raw SDP,
//     Authorization/Cookie header values, Bearer tokens).
//
// Documents over the store's 16 KiB bound are still validated (property 1)
// but not held to property 2: the store refuses them before the schema runs,
// and Validate itself promises no size bound.
func FuzzDocumentValidate(f *testing.F) {
	addSeeds(f, documentSeeds(f))
	reg := schema.NewRegistry()
	f.Fuzz(func(t *testing.T, doc []byte) {
		t.Parallel()
		in := bytes.Clone(doc)
		err := reg.Validate(schema.MediaIntentV1, in)
		if !bytes.Equal(in, doc) {
			t.Fatal("property 1: Validate modified its input")
		}
		if err2 := reg.Validate(schema.MediaIntentV1, in); (err == nil) != (err2 == nil) {
			t.Fatalf("property 1: verdict changed between two calls: %v, then %v", err, err2)
		}
		if err != nil {
			var se *schema.Error
			if !errors.As(err, &se) || !errors.Is(err, schema.ErrInvalid) {
				t.Fatalf("property 1: refused with %T: %v", err, err)
			}
			return
		}
		if len(doc) > maxDocument {
			return
		}
		if reason := acceptedDocProblem(doc); reason != "" {
			t.Fatalf("property 2: accepted a document that %s:\n%q", reason, doc)
		}
	})
}

// acceptedDocProblem returns why doc must not have been accepted, or "".
func acceptedDocProblem(doc []byte) string {
	if !utf8.Valid(doc) {
		return "is not valid UTF-8"
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "encoding/json cannot decode: " + err.Error()
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Sprintf("has data after the value (%v)", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprintf("is a %T, not an object", v)
	}
	if reason := structureProblem(doc); reason != "" {
		return reason
	}
	if err := schema.Guard(obj); err != nil {
		return "fails schema.Guard as encoding/json reads it: " + err.Error()
	}
	if reason := mediaIntentProblem(obj); reason != "" {
		return reason
	}
	return contentProblem(obj, "$")
}

// structureProblem walks encoding/json's token stream for duplicate member
// names and nesting deeper than 32.
func structureProblem(doc []byte) string {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // next token in an object is a member name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			return "has a token encoding/json refuses: " + err.Error()
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.obj && top.expect {
			name := tok.(string)
			if top.keys[name] {
				return fmt.Sprintf("repeats the member name %q", name)
			}
			top.keys[name] = true
			top.expect = false
			continue
		}
		if top != nil && top.obj {
			top.expect = true
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{obj: d == '{', keys: map[string]bool{}, expect: d == '{'})
			if len(stack) > 32 {
				return "nests deeper than 32"
			}
		}
	}
}

var (
	identifierRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	paramNameRE  = regexp.MustCompile(`^[a-z0-9-]+(\.[a-zA-Z0-9_-]+)+$`)
)

// mediaIntentProblem checks keeppeek.media-intent.v1, written from the
// schema's definition (media-intent.v1.json), not from schema/'s code.
func mediaIntentProblem(obj map[string]any) string {
	allowed := map[string]bool{"role": true, "desired": true, "source_id": true, "media_kind": true,
		"variant_id": true, "output_profile": true, "priority": true, "recording_mode": true, "parameters": true}
	for k := range obj {
		if !allowed[k] {
			return fmt.Sprintf("has the unknown top-level member %q", k)
		}
	}
	for _, k := range []string{"role", "desired", "source_id", "media_kind"} {
		if _, ok := obj[k]; !ok {
			return "lacks the required member " + k
		}
	}
	enum := func(k string, vals ...string) string {
		v, ok := obj[k]
		if !ok {
			return ""
		}
		s, isStr := v.(string)
		for _, want := range vals {
			if isStr && s == want {
				return ""
			}
		}
		return fmt.Sprintf("has %s = %#v, not one of %v", k, v, vals)
	}
	if r := enum("role", "publish", "subscribe"); r != "" {
		return r
	}
	if r := enum("media_kind", "video", "audio"); r != "" {
		return r
	}
	if r := enum("recording_mode", "inherit", "disabled", "required"); r != "" {
		return r
	}
	if _, ok := obj["recording_mode"]; obj["role"] == "publish" && !ok {
		return "is a publish intent without recording_mode"
	}
	if _, ok := obj["desired"].(bool); !ok {
		return fmt.Sprintf("has desired = %#v, not a boolean", obj["desired"])
	}
	for _, k := range []string{"source_id", "variant_id", "output_profile"} {
		v, ok := obj[k]
		if !ok {
			continue
		}
		s, isStr := v.(string)
		if !isStr || !identifierRE.MatchString(s) || s == "." || s == ".." {
			return fmt.Sprintf("has %s = %#v, not an identifier", k, v)
		}
	}
	if v, ok := obj["priority"]; ok {
		num, isNum := v.(json.Number)
		var rat big.Rat
		if !isNum {
			return fmt.Sprintf("has priority = %#v, not a number", v)
		}
		if _, ok := rat.SetString(string(num)); !ok || !rat.IsInt() || rat.Sign() < 0 || rat.Cmp(big.NewRat(1000, 1)) > 0 {
			return fmt.Sprintf("has priority = %s, not an integer in 0..1000", num)
		}
	}
	if v, ok := obj["parameters"]; ok {
		params, isObj := v.(map[string]any)
		if !isObj {
			return fmt.Sprintf("has parameters = %T, not an object", v)
		}
		for k := range params {
			if !paramNameRE.MatchString(k) {
				return fmt.Sprintf("has the parameter name %q, not <ns>.<name>", k)
			}
		}
	}
	return ""
}

// Forbidden content, re-implemented as a strict subset of schema.Guard.
var (
	credentialSubstrings = []string{"apikey", "accesskey", "authorization", "authheader", "authtoken", "bearer", "cookie",
		"credential", "password", "passwd", "passphrase", "passcode", "privatekey", "privkey", "secret", "token"}
	credentialSuffixes = []string{"pwd", "auth", "jwt"}
	headerPrefixes     = []string{"authorization:", "proxy-authorization:", "cookie:", "set-cookie:", "asp.net_sessionid=",
		"phpsessid=", "connect.sid=", "jsessionid=", "__secure-", "__host-"}
	imageMagics = []string{"/9j/", "iVBORw0KGgo", "R0lGOD", "UklGR", "JVBERi0"}
)

func contentProblem(v any, path string) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if r := nameProblem(k); r != "" {
				return fmt.Sprintf("has at %s the member name %q, which %s", path, k, r)
			}
			if r := stringContentProblem(k); r != "" {
				return fmt.Sprintf("has at %s the member name %q, which %s", path, k, r)
			}
			if r := contentProblem(v[k], path+"."+k); r != "" {
				return r
			}
		}
	case []any:
		for i, e := range v {
			if r := contentProblem(e, fmt.Sprintf("%s[%d]", path, i)); r != "" {
				return r
			}
		}
	case string:
		if r := stringContentProblem(v); r != "" {
			return fmt.Sprintf("has at %s a string that %s", path, r)
		}
	}
	return ""
}

func nameProblem(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' || c == '-' || c == '.' || c == ' ':
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	n := b.String()
	for _, w := range credentialSubstrings {
		if strings.Contains(n, w) {
			return "names a credential (" + w + ")"
		}
	}
	for _, w := range credentialSuffixes {
		if strings.HasSuffix(n, w) {
			return "names a credential (…" + w + ")"
		}
	}
	if n == "pass" || n == "pw" {
		return "names a credential (" + n + ")"
	}
	return ""
}

func isB64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("+/-_=", c) >= 0
}

func isAlnum(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

func stringContentProblem(s string) string {
	if strings.Contains(s, "-----BEGIN") {
		return "holds a PEM block"
	}
	if strings.Contains(strings.ToLower(s), ";base64,") {
		return "holds a base64 data URI"
	}
	t := strings.TrimLeft(s, " \t")
	for _, p := range headerPrefixes {
		if len(t) >= len(p) && strings.EqualFold(t[:len(p)], p) {
			return "is an HTTP header or cookie (" + p + ")"
		}
	}
	// Base64 runs; CR and LF inside a run continue it.
	for i := 0; i < len(s); {
		if !isB64(s[i]) {
			i++
			continue
		}
		start, run := i, 0
		for i < len(s) && (isB64(s[i]) || (s[i] == '\n' || s[i] == '\r')) {
			if isB64(s[i]) {
				run++
			}
			i++
		}
		if run >= 256 {
			return fmt.Sprintf("holds a base64 run of %d characters", run)
		}
		if run >= 16 {
			for _, m := range imageMagics {
				if strings.HasPrefix(s[start:], m) {
					return "holds base64 file data (" + m + ")"
				}
			}
		}
	}
	// Raw SDP: a line "v=0..." followed later by another SDP line.
	for i := 0; i+3 <= len(s); i++ {
		if (i == 0 || s[i-1] == '\n') && strings.HasPrefix(s[i:], "v=0") {
			for _, line := range strings.Split(s[i+3:], "\n")[1:] {
				if len(line) >= 2 && line[1] == '=' && strings.IndexByte("omacstb", line[0]) >= 0 {
					return "holds raw SDP"
				}
			}
		}
	}
	// Bearer tokens: "Bearer " at a word start, then 8+ token characters
	// including a digit, ending the string or followed by a separator.
	for i := 0; i+7 < len(s); i++ {
		if (i > 0 && isAlnum(s[i-1])) || !strings.EqualFold(s[i:i+7], "bearer ") {
			continue
		}
		rest := strings.TrimLeft(s[i+7:], " ")
		n, digit := 0, false
		for n < len(rest) && (isAlnum(rest[n]) || strings.IndexByte("+/=-._~", rest[n]) >= 0) {
			digit = digit || rest[n] >= '0' && rest[n] <= '9'
			n++
		}
		if n >= 8 && digit && (n == len(rest) || strings.IndexByte(" \t,;\"'\r\n", rest[n]) >= 0) {
			return "holds a Bearer token"
		}
	}
	return ""
}

// documentSeeds are testdoc.MediaIntent documents of several sizes and the
// schema package's accept and reject fixtures.
func documentSeeds(tb testing.TB) map[string][]any {
	r := realData(tb)
	seeds := map[string][]any{}
	for name, doc := range r.docs {
		if strings.HasSuffix(name, "-1") || strings.HasSuffix(name, "-30") {
			seeds[name] = []any{doc}
		}
	}
	for _, size := range []int{150, 1024, maxDocument} {
		seeds[fmt.Sprintf("testdoc-%d-7", size)] = []any{testdoc.MediaIntent(size, 7)}
	}
	for _, kind := range []string{"accept", "reject"} {
		paths, err := filepath.Glob(filepath.Join("..", "..", "schema", "testdata", kind, "*.json"))
		if err != nil || len(paths) == 0 {
			tb.Fatalf("schema fixtures: %v %v", paths, err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			seeds["schema-"+kind+"-"+strings.TrimSuffix(filepath.Base(p), ".json")] = []any{b}
		}
	}
	return seeds
}

// TestDocumentSeeds checks the oracle against the fixtures: it passes every
// accepted seed, and every document Validate accepts here.
func TestDocumentSeeds(t *testing.T) {
	t.Parallel()
	reg := schema.NewRegistry()
	for name, args := range documentSeeds(t) {
		doc := args[0].([]byte)
		err := reg.Validate(schema.MediaIntentV1, doc)
		if strings.HasPrefix(name, "schema-reject-") && err == nil {
			t.Errorf("%s: accepted", name)
		}
		if !strings.HasPrefix(name, "schema-reject-") && err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
		if err == nil {
			if r := acceptedDocProblem(doc); r != "" {
				t.Errorf("%s: oracle says it %s", name, r)
			}
		}
	}
}
