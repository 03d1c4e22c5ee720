package jsonschema_test

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
	"github.com/keeppeek/statestore/schema/jsonschema"
)

// goOnlyRule marks the MQTT bridge's credential refusals, rules of the Go
// validator that its JSON Schema does not state.
const goOnlyRule = "MQTT credentials stay in secrets.toml"

// oracle is a registry whose built-in names are checked by their embedded
// JSON Schemas compiled with the library.
func oracle(t testing.TB) *schema.Registry {
	t.Helper()
	var r schema.Registry
	for name, file := range map[string]string{schema.MediaIntentV1: "media-intent.v1.json", schema.MQTTBridgeV1: "mqtt-bridge.v1.json"} {
		src, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.NewJSONSchemaValidator(name, src)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Register(name, v); err != nil {
			t.Fatal(err)
		}
	}
	return &r
}

// agree fails unless the Go built-in and the JSON Schema give doc the same
// verdict, and the same error when both refuse it.
func agree(t testing.TB, builtin, js *schema.Registry, name string, doc []byte) {
	t.Helper()
	ge, je := builtin.Validate(name, doc), js.Validate(name, doc)
	if ge != nil && strings.Contains(ge.Error(), goOnlyRule) {
		return
	}
	if (ge == nil) != (je == nil) {
		t.Fatalf("%s %s: Go %v, JSON Schema %v", name, doc, ge, je)
	}
	if ge != nil && ge.Error() != je.Error() && !strings.Contains(ge.Error(), "publish intent requires recording_mode") {
		t.Fatalf("%s %s: Go %q, JSON Schema %q", name, doc, ge, je)
	}
}

// corpus is every stored document of package schema's tests: fixtures and
// fuzz corpora.
func corpus(t testing.TB) [][]byte {
	t.Helper()
	var docs [][]byte
	files, _ := filepath.Glob("../testdata/*/*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	fuzz, _ := filepath.Glob("../testdata/fuzz/*/*")
	for _, f := range fuzz {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if s, ok := strings.CutPrefix(strings.TrimSpace(line), "[]byte("); ok {
				if u, err := strconv.Unquote(strings.TrimSuffix(s, ")")); err == nil {
					docs = append(docs, []byte(u))
				}
			}
		}
	}
	if len(files) == 0 || len(fuzz) == 0 {
		t.Fatal("no corpus")
	}
	return docs
}

func TestBuiltinsAgreeOnCorpus(t *testing.T) {
	t.Parallel()
	builtin, js := schema.NewRegistry(), oracle(t)
	for _, doc := range corpus(t) {
		for _, name := range []string{schema.MediaIntentV1, schema.MQTTBridgeV1} {
			agree(t, builtin, js, name, doc)
		}
	}
}

// values are the replacements a mutation draws from: each type, the
// bounds of every keyword of both schemas and either side of them.
var values = []any{
	nil, true, false, "", ".", "..", "a", "publish", "subscribe", "video", "audio", "inherit", "disabled",
	"required", "inbound", "outbound", "front-door", "a b", "é", strings.Repeat("x", 128), strings.Repeat("x", 129),
	strings.Repeat("c", 64), strings.Repeat("c", 65), strings.Repeat("a.", 127) + "a", "broker.home.arpa", "fd00::1",
	"[fd00::1]", "-bad-", "a/+/b", "a/#", "#", "a/#/b", "a+b", "home/x", strings.Repeat("t", 256), strings.Repeat("t", 257),
	json.Number("0"), json.Number("-1"), json.Number("1"), json.Number("2"), json.Number("3"), json.Number("5"),
	json.Number("4"), json.Number("1000"), json.Number("1001"), json.Number("1.5"), json.Number("5.0"), json.Number("1e2"),
	json.Number("3600"), json.Number("3601"), json.Number("65535"), json.Number("65536"), json.Number("-0"),
	[]any{}, []any{json.Number("1")}, map[string]any{}, map[string]any{"a.b": json.Number("1")}, map[string]any{"A.b": true},
	map[string]any{"x": "y"}, map[string]any{"direction": "outbound", "local": "a", "remote": "b", "qos": json.Number("0")},
}

var names = []string{"role", "desired", "source_id", "media_kind", "variant_id", "output_profile", "priority",
	"recording_mode", "parameters", "enabled", "broker", "host", "port", "tls", "client_id", "keepalive_seconds",
	"mappings", "direction", "local", "remote", "qos", "extra", "cv.zone", "Bad.name", "a", "a.b.c"}

// mutate changes one random place of v: a member deleted, replaced or
// added, an item replaced, duplicated or dropped.
func mutate(rng *rand.Rand, v any) any {
	pick := func() any { return fresh(values[rng.IntN(len(values))]) }
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slicesSort(keys)
		switch op := rng.IntN(4); {
		case op == 0 && len(keys) > 0:
			delete(v, keys[rng.IntN(len(keys))])
		case op == 1 && len(keys) > 0:
			k := keys[rng.IntN(len(keys))]
			v[k] = mutate(rng, v[k])
		case op == 2 && len(keys) > 0:
			v[keys[rng.IntN(len(keys))]] = pick()
		default:
			v[names[rng.IntN(len(names))]] = pick()
		}
		return v
	case []any:
		switch op := rng.IntN(3); {
		case op == 0 && len(v) > 0:
			i := rng.IntN(len(v))
			v[i] = mutate(rng, v[i])
			return v
		case op == 1 && len(v) > 0:
			return append(v, v[rng.IntN(len(v))])
		case len(v) > 0:
			return v[1:]
		}
		return append(v, pick())
	}
	return pick()
}

// fresh copies a value of the pool, so a mutation never changes the pool
// (or makes a document contain itself).
func fresh(v any) any {
	b, _ := json.Marshal(v)
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var out any
	_ = dec.Decode(&out)
	return out
}

func slicesSort(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func decode(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBuiltinsAgreeOnGenerated mutates valid documents of both schemas one
// to four times each, 6,000 cases per schema from a fixed seed, and
// random documents of the keywords' names and values.
func TestBuiltinsAgreeOnGenerated(t *testing.T) {
	t.Parallel()
	builtin, js := schema.NewRegistry(), oracle(t)
	rng := rand.New(rand.NewPCG(30, 3))
	var seeds = map[string][][]byte{schema.MQTTBridgeV1: nil, schema.MediaIntentV1: nil}
	accept, _ := filepath.Glob("../testdata/accept/*.json")
	for _, f := range accept {
		b, _ := os.ReadFile(f)
		seeds[schema.MediaIntentV1] = append(seeds[schema.MediaIntentV1], b)
	}
	for n := range 5 {
		seeds[schema.MediaIntentV1] = append(seeds[schema.MediaIntentV1], testdoc.MediaIntent(300+n*400, n))
	}
	bridge, err := os.ReadFile("../testdata/mqtt-bridge/front-door.json")
	if err != nil {
		t.Fatal(err)
	}
	seeds[schema.MQTTBridgeV1] = [][]byte{bridge}
	accepted, refused := 0, 0
	for name, docs := range seeds {
		for i := range 6000 {
			v := decode(t, docs[i%len(docs)])
			for range 1 + rng.IntN(4) {
				v = mutate(rng, v)
			}
			if i%10 == 9 { // a random document of the schemas' names
				m := map[string]any{}
				for range rng.IntN(8) {
					m[names[rng.IntN(len(names))]] = fresh(values[rng.IntN(len(values))])
				}
				v = m
			}
			doc, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			agree(t, builtin, js, name, doc)
			if builtin.Validate(name, doc) == nil {
				accepted++
			} else {
				refused++
			}
		}
	}
	// Both verdicts must be exercised, or agreement means little.
	if accepted < 500 || refused < 500 {
		t.Fatalf("%d accepted, %d refused: the generator does not cover both", accepted, refused)
	}
	t.Logf("%d accepted, %d refused", accepted, refused)
}

// FuzzBuiltinsAgree compares the two on arbitrary bytes, seeded with the
// corpus.
func FuzzBuiltinsAgree(f *testing.F) {
	for _, doc := range corpus(f) {
		f.Add(doc, false)
		f.Add(doc, true)
	}
	builtin, js := schema.NewRegistry(), oracle(f)
	f.Fuzz(func(t *testing.T, doc []byte, bridge bool) {
		name := schema.MediaIntentV1
		if bridge {
			name = schema.MQTTBridgeV1
		}
		agree(t, builtin, js, name, doc)
	})
}
