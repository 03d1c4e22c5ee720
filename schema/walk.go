package schema

import (
	"encoding/json"
	"fmt"
	"sync"
	"unsafe"

	"github.com/valyala/fastjson"
)

// walker makes the one pass over a parsed document that everything but the
// schema's own rules rests on: the shape rules (nesting, duplicate member
// names) and [Guard] on every member name and string. A broken shape rule
// is reported before any guard offence, because it makes the document mean
// different things to different readers (encoding/json keeps the last of
// two equal names, so a forbidden first value would be stored unchecked);
// among offences of one kind, the first in the text is reported. Asked to,
// the walker also builds the Go values a [Validator] takes.
//
// The path lives in a fixed array rather than in the recursion's frames:
// it is needed only when something is rejected, and a pointer passed down
// a recursive call would make escape analysis move every frame to the heap.
type walker struct {
	// parser holds the parsed tree; it and the walker reuse their memory
	// from one document to the next, which is what keeps the write path
	// free of allocations.
	parser fastjson.Parser
	build  bool
	// markers is false when no string of the document can hold one of the
	// bytes the guard's string rules need (mayHaveMarker).
	markers bool
	depth   int
	path    [maxDepth + 1]pathSeg
	number  []byte // the text of the number being checked
	err     *Error // the first broken shape rule; ends the walk
	guard   *Error // the first guard offence; the walk goes on for shape rules
	// names holds the member names of the objects being walked, innermost
	// last, to find duplicates; sets, one per nesting level, does the same
	// for objects too large to compare every name with every other. Both
	// point into the parser's memory, so reset empties them before the
	// parser goes back to the pool.
	names []string
	sets  [maxDepth + 1]map[string]struct{}
}

// linearNames is the member count up to which comparing a name with every
// earlier one beats hashing it.
const linearNames = 8

var walkers = sync.Pool{New: func() any { return new(walker) }}

// walk checks d, a parsed document, and with build returns its
// Go values (map[string]any, []any, string, json.Number, bool, nil); the
// values own their memory, so they outlive the parser.
func (w *walker) walk(d parsed, build bool) (any, *Error) {
	w.build, w.depth, w.err, w.guard = build, 0, nil, nil
	// Without escapes, every byte of every string stands in doc as it is.
	w.markers = d.escapes || mayHaveMarker(view(d.doc))
	v := w.value(d.root, 1)
	if w.err != nil {
		return nil, w.err
	}
	return v, w.guard
}

// reset readies the walker for the pool. Each object empties what it
// added to names and sets as it ends, so only memory one huge document
// needed is let go here.
func (w *walker) reset() {
	if cap(w.names) > 4096 {
		w.names = nil
	}
	for i, set := range w.sets {
		if len(set) > 4096 {
			w.sets[i] = nil
		}
	}
	w.err, w.guard = nil, nil
}

// isDuplicate records k as a member name of the object at nesting level
// depth, whose names start at names[first], and reports whether it was
// there already.
func (w *walker) isDuplicate(k string, depth, first int) bool {
	n := len(w.names) - first
	if n < linearNames {
		for _, seen := range w.names[first:] {
			if seen == k {
				return true
			}
		}
		w.names = append(w.names, k)
		return false
	}
	set := w.sets[depth]
	if set == nil {
		set = make(map[string]struct{}, 2*linearNames)
		w.sets[depth] = set
	}
	if n == linearNames {
		for _, seen := range w.names[first:] {
			set[seen] = struct{}{}
		}
		w.names = append(w.names, "") // past linearNames: the set holds the names
	}
	n = len(set)
	set[k] = struct{}{} // one hash: a name seen before leaves the size as it was
	return len(set) == n
}

func (w *walker) fail(reason string) {
	if w.err == nil {
		w.err = &Error{Path: segsPath(w.path[:w.depth]), Reason: reason}
	}
}

func (w *walker) offend(reason string) {
	if w.guard == nil {
		w.guard = &Error{Path: segsPath(w.path[:w.depth]), Reason: reason}
	}
}

// value walks v; depth is the nesting level a container found here has.
func (w *walker) value(v *fastjson.Value, depth int) any {
	switch v.Type() {
	case fastjson.TypeObject:
		if depth > maxDepth {
			w.fail(fmt.Sprintf("nesting deeper than %d", maxDepth))
			return nil
		}
		o, _ := v.Object()
		return w.object(o, depth)
	case fastjson.TypeArray:
		if depth > maxDepth {
			w.fail(fmt.Sprintf("nesting deeper than %d", maxDepth))
			return nil
		}
		items, _ := v.Array()
		var a []any
		if w.build {
			a = make([]any, 0, len(items))
		}
		for i, item := range items {
			w.path[w.depth] = pathSeg{index: i}
			w.depth++
			x := w.value(item, depth+1)
			w.depth--
			if w.err != nil {
				return nil
			}
			if w.build {
				a = append(a, x)
			}
		}
		return a
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		if reason := checkString(view(b), w.markers); reason != "" {
			w.offend("value " + reason)
		}
		if w.build {
			return string(b)
		}
	case fastjson.TypeNumber:
		w.number = v.MarshalTo(w.number[:0])
		if !json.Valid(w.number) {
			if w.err == nil {
				w.err = &Error{Path: "$", Reason: "invalid JSON: invalid number"}
			}
			return nil
		}
		if w.build {
			return json.Number(w.number)
		}
	case fastjson.TypeTrue:
		return true
	case fastjson.TypeFalse:
		return false
	}
	return nil
}

func (w *walker) object(o *fastjson.Object, depth int) any {
	var m map[string]any
	if w.build {
		m = make(map[string]any, o.Len())
	}
	first := len(w.names)
	o.Visit(func(key []byte, child *fastjson.Value) {
		if w.err != nil {
			return
		}
		k := view(key)
		w.path[w.depth] = pathSeg{key: k, index: -1}
		w.depth++
		if w.isDuplicate(k, depth, first) {
			w.fail("duplicate field name")
			w.depth--
			return
		}
		if word := credentialWord(k); word != "" {
			w.offend("field name looks like a credential (" + word + ")")
		} else if reason := checkString(k, w.markers); reason != "" {
			// Names are strings too; a blob smuggled in as a name is
			// still a blob.
			w.offend("field name " + reason)
		}
		x := w.value(child, depth+1)
		w.depth--
		if m != nil && w.err == nil {
			m[string(key)] = x
		}
	})
	if len(w.names)-first > linearNames {
		clear(w.sets[depth])
	}
	clear(w.names[first:])
	w.names = w.names[:first]
	if w.err != nil {
		return nil
	}
	return m
}

// view is b as a string without a copy, for reading only while the parser
// that owns b is held.
func view(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
