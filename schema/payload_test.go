package schema_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/schema"
)

var updatePayloads = flag.Bool("update-payloads", false, "rewrite testdata/payload from testdoc.Issue31Fixtures")

// intent and jsonOf are testdoc's, named as the tables below read them.
var (
	intent = testdoc.Intent
	jsonOf = testdoc.JSON
)

// TestPayloadFixturesGenerated keeps testdata/payload what
// testdoc.Issue31Fixtures makes (go test -run TestPayloadFixturesGenerated -update-payloads
// ./schema/ rewrites them).
func TestPayloadFixturesGenerated(t *testing.T) {
	// Not parallel with -update-payloads: TestRejectsIssue31Payloads reads
	// the files. Without it nothing is written.
	for name, doc := range testdoc.Issue31Fixtures() {
		path := filepath.Join("testdata", "payload", name)
		if *updatePayloads {
			if err := os.WriteFile(path, append(doc, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bytes.TrimSuffix(got, []byte("\n")), doc) {
			t.Errorf("%s differs from testdoc.Issue31Fixtures (rerun with -update-payloads)", path)
		}
	}
	// And the split pieces reassemble the image byte for byte: the
	// payloads are what the issue says they are.
	var pieces []string
	if err := json.Unmarshal(jsonField(t, testdoc.Issue31Fixtures()["split-array.json"]), &pieces); err != nil {
		t.Fatal(err)
	}
	img, err := base64.StdEncoding.DecodeString(strings.Join(pieces, ""))
	if err != nil || !bytes.Equal(img, testdoc.JPEG(8100)) {
		t.Fatalf("split-array.json does not reassemble the image: %v", err)
	}
	for _, p := range pieces {
		if len(p) >= 256 {
			t.Fatalf("a piece of %d characters: the single-string rule would see it", len(p))
		}
	}
}

// jsonField returns the raw value of parameters["cv.frames"].
func jsonField(t *testing.T, doc []byte) []byte {
	var d struct {
		Parameters map[string]json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	return d.Parameters["cv.frames"]
}

// TestRejectsIssue31Payloads is every payload issue 31 found stored
// (testdoc.Issue31Payloads, which internal/attack also sends over the
// wire): each is refused, the error naming its JSON path and what was
// found there.
func TestRejectsIssue31Payloads(t *testing.T) {
	t.Parallel()
	r := schema.NewRegistry()
	files := testdoc.Issue31Fixtures()
	for _, p := range testdoc.Issue31Payloads() {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			mustReject(t, r.Validate(schema.MediaIntentV1, p.Doc), p.Path, p.Want)
		})
	}
	// The files are what the table sends: a fixture changed by hand
	// without the generator (or the reverse) fails here or in
	// TestPayloadFixturesGenerated.
	for name := range files {
		if doc := fixture(t, name); !bytes.Equal(doc, files[name]) {
			t.Errorf("testdata/payload/%s is not the payload the table holds", name)
		}
	}
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	return bytes.TrimSuffix(readFixture(t, filepath.Join("payload", name)), []byte("\n"))
}

// nearMisses are values next to each rule of issue 31 that must stay
// storable, each as a parameter value.
var nearMisses = map[string]string{
	"small priorities":        `[1, 5, 10, 50, 100, 0, 7]`,
	"many small priorities":   "[" + strings.Repeat("3,", 255) + "3]", // 256 byte-sized numbers: at the bound
	"coordinates":             `[[0, 0], [640, 360], [1280, 720], [0.5, 0.25]]`,
	"histogram":               jsonOf(make([]int, 200)),
	"a sentence with a colon": `"Note: the camera at the front door is mounted upside down; rotate 180 degrees."`,
	"two-line description":    `"Front door camera.\nMounted above the porch, facing the street."`,
	"four lines":              `"line one\nline two\nline three\nline four\n"`,
	"hex colour":              `"#ff8800"`,
	"UUID":                    `"123e4567-e89b-12d3-a456-426614174000"`,
	"UUIDs":                   jsonOf(uuids(20)),
	"ISO time":                `"2026-11-30T08:00:01Z"`,
	"one timestamped line":    `"2026-11-30T08:00:01Z restarted after a power cut"`,
	"identifiers":             jsonOf(strings.Fields(strings.Repeat("front-door back-yard garage-left garage-right browser-h264-720p camera-12 ", 6))),
	"labels":                  jsonOf(strings.Fields(strings.Repeat("person car bicycle dog cat truck bus motorcycle ", 8))),
	"camelCase names":         `{"maxBitRateKbps":1,"minKeyFrameInterval":2,"preferHardwareEncoder":true,"audioChannelLayout":"stereo","targetFrameRate":30,"scaleMode":"fit","cropTopPixels":0,"cropLeftPixels":0,"outputWidth":1280,"outputHeight":720,"colorSpace":"bt709","toneMapping":"none","deinterlaceMode":"auto","sharpenAmount":0}`,
	"two checksums":           jsonOf([]string{strings.Repeat("9f86d081", 8), strings.Repeat("2c26b46b", 8)}),
	"SDP-like settings":       `"a=1\nb=2"`,
	"an ICE server URL":       `"stun:stun.example.com:3478"`,
	"prose with eyJ":          `"heyJude.mp3 plays next"`,
	"AKIA in a word":          `"XAKIAIOSFODNN7EXAMPLE"`,
	"numbers in a sentence":   `"retry 3 times, then 10, 20 and 40 seconds apart"`,
	"repeated word":           jsonOf(strings.Repeat("word ", 500)),
	"large finite number":     `1e308`,
	"tiny number":             `1e-400`,
	"long integer":            `123456789012345678901234567890`,
	"surrogate pair":          `"\ud83d\ude00"`,
	"replacement character":   `"\ufffd"`,
	"escaped controls":        `"tab\there"`,
}

func uuids(n int) []string {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]string, n)
	for i := range out {
		var b [16]byte
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		h := hex.EncodeToString(b[:])
		out[i] = h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	}
	return out
}

func TestAcceptsNearMisses(t *testing.T) {
	t.Parallel()
	r := schema.NewRegistry()
	for name, raw := range nearMisses {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, doc := range [][]byte{intent("cv.x", raw), intent("cv.x", "["+raw+","+raw+"]"), intent("cv.x", `{"a":`+raw+`}`)} {
				if err := r.Validate(schema.MediaIntentV1, doc); err != nil {
					t.Errorf("rejected %.80s: %v", doc, err)
				}
			}
		})
	}
}

// TestAcceptedDecodeEverywhere pins what the store's acceptance promises
// every reader: a document it accepts decodes with encoding/json into any
// (numbers as float64, as JavaScript reads them), and encoding that again
// gives a document that decodes to the same values.
func TestAcceptedDecodeEverywhere(t *testing.T) {
	t.Parallel()
	r := schema.NewRegistry()
	docs := map[string][]byte{}
	files, _ := filepath.Glob("testdata/accept/*.json")
	for _, f := range files {
		docs[f] = readFixture(t, filepath.Join("accept", filepath.Base(f)))
	}
	for name, raw := range nearMisses {
		docs[name] = intent("cv.x", raw)
	}
	for _, size := range []int{160, 2193, 16384} {
		docs["MediaIntent("+strconv.Itoa(size)+")"] = testdoc.MediaIntent(size, 5)
	}
	if len(files) == 0 {
		t.Fatal("no accept fixtures")
	}
	for name, doc := range docs {
		if err := r.Validate(schema.MediaIntentV1, doc); err != nil {
			t.Fatalf("%s: rejected: %v", name, err)
		}
		if err := schema.DecodesEverywhere(doc); err != "" {
			t.Errorf("%s: %s", name, err)
		}
	}
}
