// Package testdoc builds deterministic desired-state documents for tests and
// benchmarks, so every package measures and checks the same shapes.
package testdoc

import (
	"fmt"
	"strconv"
)

// phrases fill parameter values. They are short, space-separated words, so
// a padded document never contains a long base64-looking run or a name the
// content guard treats as a credential.
var phrases = []string{
	"scale to 1280x720 and keep the aspect ratio",
	"prefer hardware encoder when one is idle",
	"drop frames rather than add latency",
	"key frame every two seconds for fast joins",
	"limit to three renditions per source",
	"retry after a short pause on encoder failure",
	"use the front door camera wide angle lens",
	"mix mono audio down from the left channel",
}

// namespaces prefix parameter names, as the schema requires ("<ns>.<name>").
var namespaces = []string{"transcoder", "recorder", "cv", "layout"}

// MediaIntent returns a schema-valid keeppeek.media-intent.v1 publish document
// of exactly size bytes, padded inside "parameters" with namespaced keys
// holding short human-readable strings. The same size and seed always give
// the same bytes; different seeds give different source_id values, so a
// benchmark writing MediaIntent(n, i) stores distinct documents. It panics if
// size is too small to hold the required fields (about 150 bytes).
func MediaIntent(size int, seed int) []byte {
	// Small sizes drop optional fields rather than fail, so tests can ask
	// for documents down to about 150 bytes.
	optional := []string{
		`"variant_id":"browser-h264-720p","output_profile":"browser-h264-720p","priority":` + strconv.Itoa(100+seed%2*10) + `,`,
		`"priority":` + strconv.Itoa(100+seed%2*10) + `,`,
		``,
	}
	var head string
	for _, opt := range optional {
		head = `{"role":"publish","desired":true,"source_id":"camera-` + strconv.Itoa(seed) + `","media_kind":"video",` +
			opt + `"recording_mode":"disabled","parameters":{`
		if len(head)+len(`"transcoder.note-0":""}}`) <= size {
			break
		}
	}
	const tail = "}}"
	buf := make([]byte, 0, size)
	buf = append(buf, head...)
	for i := 0; ; i++ {
		key := namespaces[i%len(namespaces)] + ".note-" + strconv.Itoa(i)
		sep := ""
		if i > 0 {
			sep = ","
		}
		// Bytes left for this member's value once its name, quotes and
		// the closing braces are in place.
		room := size - len(buf) - len(sep) - len(key) - len(`"":""`) - len(tail)
		if room < 0 {
			panic(fmt.Sprintf("testdoc: size %d is below the minimum %d", size, size-room))
		}
		phrase := phrases[(i+seed%len(phrases)+len(phrases))%len(phrases)]
		value := phrase
		// Finish with this member unless the next one still fits after
		// it; the last value absorbs whatever bytes remain.
		next := namespaces[(i+1)%len(namespaces)] + ".note-" + strconv.Itoa(i+1)
		last := room < len(phrase)+len(`,"":""`)+len(next)
		if last {
			value = fill(room)
		}
		buf = append(buf, sep...)
		buf = append(buf, '"')
		buf = append(buf, key...)
		buf = append(buf, `":"`...)
		buf = append(buf, value...)
		buf = append(buf, '"')
		if last {
			break
		}
	}
	buf = append(buf, tail...)
	if len(buf) != size {
		panic(fmt.Sprintf("testdoc: built %d bytes, want %d", len(buf), size))
	}
	return buf
}

// fill returns n bytes of prose taken from the phrases.
func fill(n int) string {
	b := make([]byte, 0, n)
	for i := 0; len(b) < n; i++ {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, phrases[i%len(phrases)]...)
	}
	return string(b[:n])
}
