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

var updatePayloads = flag.Bool("update-payloads", false, "rewrite testdata/payload from payloadFixtures")

// jpegBytes is the image of the issue 31 payloads: n bytes that start and
// end as a JFIF file does (SOI, an APP0 JFIF segment; EOI), with
// entropy-coded data between them drawn from a fixed PCG seed, so the
// fixtures are the same on every run and every Go version (PCG's output
// is specified).
func jpegBytes(n int) []byte {
	head := []byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00}
	b := append([]byte{}, head...)
	rng := rand.New(rand.NewPCG(31, 4))
	for len(b) < n-2 {
		b = append(b, byte(rng.Uint32()))
	}
	return append(b, 0xff, 0xd9)
}

// intent is a subscribe intent whose parameters member "cv.x" (or, with
// name "", the parameters object itself) holds raw, JSON text.
func intent(name, raw string) []byte {
	if name == "" {
		return []byte(`{"role":"subscribe","desired":true,"source_id":"front-door","media_kind":"video","parameters":` + raw + `}`)
	}
	return []byte(`{"role":"subscribe","desired":true,"source_id":"front-door","media_kind":"video","parameters":{` +
		strconv.Quote(name) + `:` + raw + `}}`)
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// chunks cuts s into pieces of n bytes (the last shorter).
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out, s = append(out, s[:n]), s[n:]
	}
	return append(out, s)
}

// payloadFixtures generates testdata/payload: the issue 31 payloads too
// big to read inline, each a document the store once accepted.
func payloadFixtures() map[string][]byte {
	img := jpegBytes(8100)
	b64 := base64.StdEncoding.EncodeToString(img)
	url := base64.RawURLEncoding.EncodeToString(img[:3000])
	small := base64.StdEncoding.EncodeToString(img[:3000])
	docs := map[string][]byte{}
	docs["split-array.json"] = intent("cv.frames", jsonOf(chunks(b64, 255)))
	names := map[string]int{}
	for i, c := range chunks(small, 200) {
		names[c] = i
	}
	docs["split-names.json"] = intent("cv.blob", jsonOf(names))
	params := map[string]int{}
	for i, c := range chunks(url, 120) {
		params["x."+c] = i
	}
	docs["split-parameter-names.json"] = intent("", jsonOf(params))
	values := map[string]string{}
	for i, c := range chunks(small, 200) {
		values["p"+strconv.Itoa(i)] = c
	}
	docs["split-values.json"] = intent("cv.blob", jsonOf(values))
	docs["spaced-base64.json"] = intent("cv.thumb", jsonOf(strings.Join(chunks(b64, 4), " ")))
	docs["spaced-hex.json"] = intent("cv.thumb", jsonOf(strings.Join(chunks(hex.EncodeToString(img[:3000]), 2), " ")))
	nums := make([]int, len(img))
	for i, c := range img {
		nums[i] = int(c)
	}
	docs["byte-array.json"] = intent("cv.thumb", jsonOf(nums))
	return docs
}

// TestPayloadFixturesGenerated keeps testdata/payload what payloadFixtures
// makes (go test -run TestPayloadFixturesGenerated -update-payloads
// ./schema/ rewrites them).
func TestPayloadFixturesGenerated(t *testing.T) {
	// Not parallel with -update-payloads: TestRejectsIssue31Payloads reads
	// the files. Without it nothing is written.
	for name, doc := range payloadFixtures() {
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
			t.Errorf("%s differs from payloadFixtures (rerun with -update-payloads)", path)
		}
	}
	// And the split pieces reassemble the image byte for byte: the
	// payloads are what the issue says they are.
	var pieces []string
	if err := json.Unmarshal(jsonField(t, payloadFixtures()["split-array.json"]), &pieces); err != nil {
		t.Fatal(err)
	}
	img, err := base64.StdEncoding.DecodeString(strings.Join(pieces, ""))
	if err != nil || !bytes.Equal(img, jpegBytes(8100)) {
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

const sdpMedia = "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=ice-pwd:asd88fgpdd777uzjYhagZg\r\n" +
	"a=fingerprint:sha-256 D2:FA:0E:C3:22:59:5E:14:95:69:92:3D:13:B4:84:24:2C:C2:A2:C0:3E:FD:34:8E:5E:EA:6F:AF:52:CE:E6:0F\r\n"

const sdpSession = "v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"

const jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"

// TestRejectsIssue31Payloads is every payload issue 31 found stored: each
// is refused, the error naming its JSON path and what was found there.
func TestRejectsIssue31Payloads(t *testing.T) {
	t.Parallel()
	log := strings.Join([]string{
		"2026-11-30T08:00:01Z INFO worker started", "2026-11-30T08:00:02Z INFO lease claimed",
		"2026-11-30T08:00:03Z WARN variant not ready", "2026-11-30T08:00:04Z INFO variant ready",
		"2026-11-30T08:00:05Z INFO publication started", "2026-11-30T08:00:09Z ERROR encoder stalled",
		"2026-11-30T08:00:10Z INFO encoder restarted"}, "\n")
	tests := []struct {
		name       string
		doc        []byte
		path, want string
	}{
		{"base64 split across array elements", fixture(t, "split-array.json"), `$.parameters["cv.frames"]`, "base64 split across array elements (10,800 characters joined)"},
		{"base64 split across member names", fixture(t, "split-names.json"), `$.parameters["cv.blob"]`, "base64 split across member names (4,000 characters joined)"},
		{"base64url split across parameter names", fixture(t, "split-parameter-names.json"), `$.parameters`, "base64 split across member names"},
		{"base64 split across member values", fixture(t, "split-values.json"), `$.parameters["cv.blob"]`, "base64 split across member values (4,000 characters joined)"},
		{"base64 with a space every four characters", fixture(t, "spaced-base64.json"), `$.parameters["cv.thumb"]`, "base64 in spaced groups (10,800 characters)"},
		{"space-separated hex", fixture(t, "spaced-hex.json"), `$.parameters["cv.thumb"]`, "hex in spaced groups (6,000 characters)"},
		{"JPEG bytes as an array of numbers", fixture(t, "byte-array.json"), `$.parameters["cv.thumb"]`, "an array of 8,100 byte-sized numbers"},
		{"hex split across array elements", intent("cv.x", jsonOf(chunks(hex.EncodeToString(jpegBytes(400)), 64))), `$.parameters["cv.x"]`, "hex split across array elements (800 characters joined)"},
		{"SDP media section without v=", intent("webrtc.answer", jsonOf(sdpMedia)), `$.parameters["webrtc.answer"]`, "raw SDP (a=ice-pwd)"},
		{"SDP with a leading space", intent("webrtc.offer", jsonOf(" "+sdpSession)), `$.parameters["webrtc.offer"]`, "raw SDP (v=)"},
		{"SDP v=1", intent("webrtc.offer", jsonOf(strings.Replace(sdpSession, "v=0", "v=1", 1))), `$.parameters["webrtc.offer"]`, "raw SDP (v=)"},
		{"SDP session without v=", intent("webrtc.offer", jsonOf(strings.TrimPrefix(sdpSession, "v=0\r\n")+"m=video 9 UDP/TLS/RTP/SAVPF 96\r\n")), `$.parameters["webrtc.offer"]`, "raw SDP (o=)"},
		{"one SDP line with a=ice-pwd", intent("webrtc.ice", jsonOf("a=ice-pwd:asd88fgpdd777uzjYhagZg")), `$.parameters["webrtc.ice"]`, "raw SDP (a=ice-pwd)"},
		{"one SDP line with a=fingerprint", intent("webrtc.dtls", jsonOf("a=fingerprint:sha-256 D2:FA:0E:C3")), `$.parameters["webrtc.dtls"]`, "raw SDP (a=fingerprint)"},
		{"bare JWT", intent("http.session", jsonOf(jwt)), `$.parameters["http.session"]`, "a JSON Web Token"},
		{"JWT in prose", intent("http.note", jsonOf("use "+jwt+" until noon")), `$.parameters["http.note"]`, "a JSON Web Token"},
		{"unsigned JWT", intent("http.session", jsonOf("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.")), `$.parameters["http.session"]`, "a JSON Web Token"},
		{"AWS access key pair", intent("", `{"aws.id":"AKIAIOSFODNN7EXAMPLE","aws.key":"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`), `$.parameters["aws.id"]`, "an AWS access key id"},
		{"AWS access key pair in one string", intent("s3.upload", jsonOf("AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")), `$.parameters["s3.upload"]`, "an AWS access key id and secret"},
		{"temporary AWS key id", intent("s3.upload", jsonOf("ASIAIOSFODNN7EXAMPLE")), `$.parameters["s3.upload"]`, "an AWS access key id"},
		{"x.passw0rd", intent("x.passw0rd", `"hunter2"`), `$.parameters["x.passw0rd"]`, "looks like a credential (password)"},
		{"s3cr3t", intent("x.s3cr3t", `1`), `$.parameters["x.s3cr3t"]`, "looks like a credential (secret)"},
		{"t0k3n nested", intent("x.y", `{"refresh_t0k3n":1}`), `$.parameters["x.y"].refresh_t0k3n`, "looks like a credential (token)"},
		{"multi-line log text", intent("ops.log", jsonOf(log)), `$.parameters["ops.log"]`, "log text (7 lines)"},
		{"multi-line text", intent("ops.notes", jsonOf("one\ntwo\nthree\nfour\nfive\nsix\nseven")), `$.parameters["ops.notes"]`, "multi-line text (7 lines, at most 4)"},
		{"two log lines", intent("ops.log", jsonOf("[ERROR] encoder stalled\n[INFO] encoder restarted")), `$.parameters["ops.log"]`, "log text (2 lines)"},
		{"1e999 in parameters", intent("cv.threshold", `1e999`), `$.parameters["cv.threshold"]`, "a number that is not finite in float64 (1e999)"},
		{"-1e400 in an array", intent("cv.zones", `[1,-1e400]`), `$.parameters["cv.zones"][1]`, "not finite in float64 (-1e400)"},
		{"lone surrogate", intent("cv.label", `"a\ud800b"`), `$.parameters["cv.label"]`, `a lone surrogate \ud800`},
		{"lone low surrogate", intent("cv.label", `"\udc00"`), `$.parameters["cv.label"]`, `a lone surrogate \udc00`},
		{"lone surrogate in a name", intent("", `{"cv.\ud800":1}`), "$.parameters[\"cv.\ufffd\"]", `field name holds a lone surrogate \ud800`},
		{"NUL", intent("cv.label", `"a\u0000b"`), `$.parameters["cv.label"]`, "a NUL character"},
	}
	r := schema.NewRegistry()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mustReject(t, r.Validate(schema.MediaIntentV1, tt.doc), tt.path, tt.want)
		})
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
