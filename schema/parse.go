package schema

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// parsed is one document read by valyala/fastjson: doc is the text parsed
// and root its tree, valid until release hands the walker that holds the
// parser back.
type parsed struct {
	w       *walker
	doc     []byte
	root    *fastjson.Value
	escapes bool // doc holds a backslash
}

func (d parsed) release() {
	d.w.reset()
	walkers.Put(d.w)
}

// walk makes the walker's one pass over the document; see walker.
func (d parsed) walk(build bool) (any, *Error) { return d.w.walk(d, build) }

// parse reads doc as exactly one JSON value, with the strictness the
// package comment promises: valid UTF-8, the JSON grammar as RFC 8259
// states it, and escapes meaning what encoding/json makes of them.
//
// fastjson's parser checks the structure (and bounds nesting, at
// fastjson.MaxDepth) but lets a few things through, each of which is
// checked where it can stand, so that the common document pays for no
// second pass: the escapes of a document that has any, by fastjson.Validate
// (after the parse, since it recurses as deep as the document does);
// control characters, by encoding/json, in a document that has any; and
// every number, by encoding/json's grammar, in the walk (the parser reads
// NaN, 1.2.3 or 01 as numbers).
func parse(doc []byte) (parsed, *Error) {
	if !utf8.Valid(doc) {
		return parsed{}, &Error{Path: "$", Reason: "invalid JSON: invalid UTF-8"}
	}
	d := parsed{w: walkers.Get().(*walker), doc: doc, escapes: bytes.IndexByte(doc, '\\') >= 0}
	v, err := d.w.parser.ParseBytes(doc)
	if err == nil && d.escapes {
		err = fastjson.ValidateBytes(doc)
	}
	if err == nil && hasControlByte(doc) && !json.Valid(doc) {
		err = errControlInString
	}
	if err == nil && d.escapes {
		if fixed, ok := replaceLoneSurrogates(doc); ok {
			d.doc = fixed
			v, err = d.w.parser.ParseBytes(fixed)
		}
	}
	if err != nil {
		d.release()
		reason := syntaxReason(err.Error())
		if len(bytes.Trim(doc, " \t\r\n")) == 0 {
			reason = "empty document"
		}
		return parsed{}, &Error{Path: "$", Reason: "invalid JSON: " + reason, Err: err}
	}
	d.root = v
	return d, nil
}

// errControlInString: a control character in a string. Neither fastjson's
// parser nor, when it stands before an escape in the same string, its
// validator refuses one, so a document with a control byte anywhere
// (compact ones have none; pretty-printed ones have line breaks) is
// checked by encoding/json, which holds to the grammar exactly.
var errControlInString = errors.New("control character in a string")

// hasControlByte reports whether doc holds a byte below 0x20, eight bytes
// at a time: it runs for every document.
func hasControlByte(doc []byte) bool {
	const lsbs, msbs = 0x0101010101010101, 0x8080808080808080
	for len(doc) >= 8 {
		// A byte below 0x20 borrows into its top bit; a byte with the top
		// bit already set is masked out by ^x.
		if x := binary.LittleEndian.Uint64(doc); (x-lsbs*0x20)&^x&msbs != 0 {
			return true
		}
		doc = doc[8:]
	}
	for _, c := range doc {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// syntaxReason shortens a fastjson error to what a writer needs: the
// library quotes the unparsed rest of the document, and a reason must not
// repeat document contents (see [Error]).
func syntaxReason(msg string) string {
	if i := strings.Index(msg, "; unparsed tail"); i >= 0 {
		msg = msg[:i]
	}
	if strings.HasPrefix(msg, "unexpected tail") {
		return "data after the document"
	}
	msg = strings.TrimPrefix(msg, "cannot parse JSON: ")
	if i := strings.Index(msg, "too short escape sequence"); i >= 0 {
		msg = msg[:i+len("too short escape sequence")]
	}
	return msg
}

// replaceLoneSurrogates returns a copy of doc, a valid JSON document, with
// every \u escape of a UTF-16 surrogate that is not half of a pair turned
// into \ufffd, or ok false when there is none (nearly always: the common
// case costs one search for a backslash). encoding/json, and so every
// reader of a stored document, decodes such an escape as U+FFFD, whereas
// fastjson keeps its six characters as written; checking the text the
// readers will see keeps a stray "\ud800" from hiding a word boundary or
// a base64 run from the guard. The replacement has the same length, so
// offsets do not move.
func replaceLoneSurrogates(doc []byte) (out []byte, ok bool) {
	for i := bytes.IndexByte(doc, '\\'); i >= 0 && i+1 < len(doc); {
		// In a valid document a backslash only ever starts an escape,
		// and escapes are visited one after another, so i is always at
		// the start of one.
		n := 2
		if doc[i+1] == 'u' {
			n = 6
			if r := hexRune(doc[i+2 : i+6]); utf16.IsSurrogate(r) {
				paired := r < 0xdc00 && i+12 <= len(doc) && doc[i+6] == '\\' && doc[i+7] == 'u' &&
					utf16.DecodeRune(r, hexRune(doc[i+8:i+12])) != utf8.RuneError
				if paired {
					n = 12
				} else {
					if out == nil {
						out = bytes.Clone(doc)
					}
					copy(out[i+2:i+6], "fffd")
				}
			}
		}
		next := bytes.IndexByte(doc[i+n:], '\\')
		if next < 0 {
			break
		}
		i += n + next
	}
	return out, out != nil
}

// hexRune decodes four hex digits, which fastjson.Validate has checked.
func hexRune(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= 'a':
			c -= 'a' - 10
		case c >= 'A':
			c -= 'A' - 10
		default:
			c -= '0'
		}
		r = r<<4 | rune(c)
	}
	return r
}
