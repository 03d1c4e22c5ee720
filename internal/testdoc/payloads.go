package testdoc

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
)

// JPEG is the image of the issue 31 payloads: n bytes that start and end
// as a JFIF file does (SOI, an APP0 JFIF segment; EOI), with entropy-coded
// data between them drawn from a fixed PCG seed, so the payloads are the
// same on every run and every Go version (PCG's output is specified).
func JPEG(n int) []byte {
	head := []byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00}
	b := append([]byte{}, head...)
	rng := rand.New(rand.NewPCG(31, 4))
	for len(b) < n-2 {
		b = append(b, byte(rng.Uint32()))
	}
	return append(b, 0xff, 0xd9)
}

// Intent is a subscribe media intent whose parameters member name (or,
// with name "", the parameters object itself) holds raw, JSON text.
func Intent(name, raw string) []byte {
	if name == "" {
		return []byte(`{"role":"subscribe","desired":true,"source_id":"front-door","media_kind":"video","parameters":` + raw + `}`)
	}
	return []byte(`{"role":"subscribe","desired":true,"source_id":"front-door","media_kind":"video","parameters":{` +
		strconv.Quote(name) + `:` + raw + `}}`)
}

// JSON is v in encoding/json's form; it panics on what json cannot
// encode, which no caller builds.
func JSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Chunks cuts s into pieces of n bytes (the last shorter).
func Chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out, s = append(out, s[:n]), s[n:]
	}
	return append(out, s)
}

// Issue31Fixtures are the issue 31 payloads too big to read inline, by
// file name (schema/testdata/payload holds them as files): each a
// document the store once accepted.
func Issue31Fixtures() map[string][]byte {
	img := JPEG(8100)
	b64 := base64.StdEncoding.EncodeToString(img)
	url := base64.RawURLEncoding.EncodeToString(img[:3000])
	small := base64.StdEncoding.EncodeToString(img[:3000])
	docs := map[string][]byte{}
	docs["split-array.json"] = Intent("cv.frames", JSON(Chunks(b64, 255)))
	names := map[string]int{}
	for i, c := range Chunks(small, 200) {
		names[c] = i
	}
	docs["split-names.json"] = Intent("cv.blob", JSON(names))
	params := map[string]int{}
	for i, c := range Chunks(url, 120) {
		params["x."+c] = i
	}
	docs["split-parameter-names.json"] = Intent("", JSON(params))
	values := map[string]string{}
	for i, c := range Chunks(small, 200) {
		values["p"+strconv.Itoa(i)] = c
	}
	docs["split-values.json"] = Intent("cv.blob", JSON(values))
	docs["spaced-base64.json"] = Intent("cv.thumb", JSON(strings.Join(Chunks(b64, 4), " ")))
	docs["spaced-hex.json"] = Intent("cv.thumb", JSON(strings.Join(Chunks(hex.EncodeToString(img[:3000]), 2), " ")))
	nums := make([]int, len(img))
	for i, c := range img {
		nums[i] = int(c)
	}
	docs["byte-array.json"] = Intent("cv.thumb", JSON(nums))
	return docs
}

// Payload is one document the content guard must refuse: Path is the
// JSON path its refusal names, Want a part of its reason.
type Payload struct {
	Name string
	Doc  []byte
	Path string
	Want string
}

const (
	sdpMedia = "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=ice-pwd:asd88fgpdd777uzjYhagZg\r\n" +
		"a=fingerprint:sha-256 D2:FA:0E:C3:22:59:5E:14:95:69:92:3D:13:B4:84:24:2C:C2:A2:C0:3E:FD:34:8E:5E:EA:6F:AF:52:CE:E6:0F\r\n"
	sdpSession = "v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
	jwt        = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

// Issue31Payloads is every payload issue 31 found stored, with the path
// and reason of its refusal: the schema's own test and the attack suite
// (over the wire) hold the guard to the same table.
func Issue31Payloads() []Payload {
	log := strings.Join([]string{
		"2026-11-30T08:00:01Z INFO worker started", "2026-11-30T08:00:02Z INFO lease claimed",
		"2026-11-30T08:00:03Z WARN variant not ready", "2026-11-30T08:00:04Z INFO variant ready",
		"2026-11-30T08:00:05Z INFO publication started", "2026-11-30T08:00:09Z ERROR encoder stalled",
		"2026-11-30T08:00:10Z INFO encoder restarted"}, "\n")
	f := Issue31Fixtures()
	return []Payload{
		{"base64 split across array elements", f["split-array.json"], `$.parameters["cv.frames"]`, "base64 split across array elements (10,800 characters joined)"},
		{"base64 split across member names", f["split-names.json"], `$.parameters["cv.blob"]`, "base64 split across member names (4,000 characters joined)"},
		{"base64url split across parameter names", f["split-parameter-names.json"], `$.parameters`, "base64 split across member names"},
		{"base64 split across member values", f["split-values.json"], `$.parameters["cv.blob"]`, "base64 split across member values (4,000 characters joined)"},
		{"base64 with a space every four characters", f["spaced-base64.json"], `$.parameters["cv.thumb"]`, "base64 in spaced groups (10,800 characters)"},
		{"space-separated hex", f["spaced-hex.json"], `$.parameters["cv.thumb"]`, "hex in spaced groups (6,000 characters)"},
		{"JPEG bytes as an array of numbers", f["byte-array.json"], `$.parameters["cv.thumb"]`, "an array of 8,100 byte-sized numbers"},
		{"hex split across array elements", Intent("cv.x", JSON(Chunks(hex.EncodeToString(JPEG(400)), 64))), `$.parameters["cv.x"]`, "hex split across array elements (800 characters joined)"},
		{"SDP media section without v=", Intent("webrtc.answer", JSON(sdpMedia)), `$.parameters["webrtc.answer"]`, "raw SDP (a=ice-pwd)"},
		{"SDP with a leading space", Intent("webrtc.offer", JSON(" "+sdpSession)), `$.parameters["webrtc.offer"]`, "raw SDP (v=)"},
		{"SDP v=1", Intent("webrtc.offer", JSON(strings.Replace(sdpSession, "v=0", "v=1", 1))), `$.parameters["webrtc.offer"]`, "raw SDP (v=)"},
		{"SDP session without v=", Intent("webrtc.offer", JSON(strings.TrimPrefix(sdpSession, "v=0\r\n")+"m=video 9 UDP/TLS/RTP/SAVPF 96\r\n")), `$.parameters["webrtc.offer"]`, "raw SDP (o=)"},
		{"one SDP line with a=ice-pwd", Intent("webrtc.ice", JSON("a=ice-pwd:asd88fgpdd777uzjYhagZg")), `$.parameters["webrtc.ice"]`, "raw SDP (a=ice-pwd)"},
		{"one SDP line with a=fingerprint", Intent("webrtc.dtls", JSON("a=fingerprint:sha-256 D2:FA:0E:C3")), `$.parameters["webrtc.dtls"]`, "raw SDP (a=fingerprint)"},
		{"bare JWT", Intent("http.session", JSON(jwt)), `$.parameters["http.session"]`, "a JSON Web Token"},
		{"JWT in prose", Intent("http.note", JSON("use "+jwt+" until noon")), `$.parameters["http.note"]`, "a JSON Web Token"},
		{"unsigned JWT", Intent("http.session", JSON("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.")), `$.parameters["http.session"]`, "a JSON Web Token"},
		{"AWS access key pair", Intent("", `{"aws.id":"AKIAIOSFODNN7EXAMPLE","aws.key":"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`), `$.parameters["aws.id"]`, "an AWS access key id"},
		{"AWS access key pair in one string", Intent("s3.upload", JSON("AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")), `$.parameters["s3.upload"]`, "an AWS access key id and secret"},
		{"temporary AWS key id", Intent("s3.upload", JSON("ASIAIOSFODNN7EXAMPLE")), `$.parameters["s3.upload"]`, "an AWS access key id"},
		{"x.passw0rd", Intent("x.passw0rd", `"hunter2"`), `$.parameters["x.passw0rd"]`, "looks like a credential (password)"},
		{"s3cr3t", Intent("x.s3cr3t", `1`), `$.parameters["x.s3cr3t"]`, "looks like a credential (secret)"},
		{"t0k3n nested", Intent("x.y", `{"refresh_t0k3n":1}`), `$.parameters["x.y"].refresh_t0k3n`, "looks like a credential (token)"},
		{"multi-line log text", Intent("ops.log", JSON(log)), `$.parameters["ops.log"]`, "log text (7 lines)"},
		{"multi-line text", Intent("ops.notes", JSON("one\ntwo\nthree\nfour\nfive\nsix\nseven")), `$.parameters["ops.notes"]`, "multi-line text (7 lines, at most 4)"},
		{"two log lines", Intent("ops.log", JSON("[ERROR] encoder stalled\n[INFO] encoder restarted")), `$.parameters["ops.log"]`, "log text (2 lines)"},
		{"1e999 in parameters", Intent("cv.threshold", `1e999`), `$.parameters["cv.threshold"]`, "a number that is not finite in float64 (1e999)"},
		{"-1e400 in an array", Intent("cv.zones", `[1,-1e400]`), `$.parameters["cv.zones"][1]`, "not finite in float64 (-1e400)"},
		{"lone surrogate", Intent("cv.label", `"a\ud800b"`), `$.parameters["cv.label"]`, `a lone surrogate \ud800`},
		{"lone low surrogate", Intent("cv.label", `"\udc00"`), `$.parameters["cv.label"]`, `a lone surrogate \udc00`},
		{"lone surrogate in a name", Intent("", `{"cv.\ud800":1}`), "$.parameters[\"cv.\ufffd\"]", `field name holds a lone surrogate \ud800`},
		{"NUL", Intent("cv.label", `"a\u0000b"`), `$.parameters["cv.label"]`, "a NUL character"},
	}
}
