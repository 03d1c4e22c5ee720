package settings

import (
	"bytes"
	"fmt"

	"github.com/pelletier/go-toml/v2/unstable"
)

// span is a byte range [start, end) of config.toml.
type span struct{ start, end int }

// header is a table header of config.toml: where its line starts, and
// whether it is one of the state_store tables.
type header struct {
	start int
	ours  bool
}

// locate returns the spans of config holding the state_store tables, in
// file order. A span runs from the start of a state_store header line to
// the end of the last line of content before the next header that is not
// part of state_store (or the end of the file): blank lines and comment
// lines directly above the next table stay with that table. Headers are
// found with a TOML parser, so a '[' at the start of a line inside a
// multi-line string or array is never mistaken for one.
func locate(config []byte) ([]span, error) {
	var p unstable.Parser
	p.Reset(config)
	var hs []header
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			it := e.Key()
			it.Next()
			first := it.Node()
			off := int(first.Raw.Offset)
			hs = append(hs, header{start: bytes.LastIndexByte(config[:off], '\n') + 1, ours: string(first.Data) == SectionName})
		case unstable.KeyValue:
			if len(hs) > 0 {
				continue
			}
			it := e.Key()
			it.Next()
			if string(it.Node().Data) == SectionName {
				// A root key `state_store = {…}` or `state_store.x = …`
				// has no table of its own to replace.
				return nil, &SyntaxError{Err: fmt.Errorf("%s must be written as [%s] tables, not as a root key", SectionName, SectionName)}
			}
		}
	}
	if err := p.Error(); err != nil {
		return nil, &SyntaxError{Err: err}
	}
	var spans []span
	for i, h := range hs {
		if !h.ours {
			continue
		}
		end := len(config)
		if i+1 < len(hs) {
			end = hs[i+1].start
		}
		if i+1 == len(hs) || !hs[i+1].ours {
			end = trimTail(config, h.start, end)
		}
		if n := len(spans); n > 0 && spans[n-1].end == h.start {
			spans[n-1].end = end
		} else {
			spans = append(spans, span{h.start, end})
		}
	}
	return spans, nil
}

// trimTail moves end back over the blank and comment-only lines that end
// the block [start, end), never past the block's header line. The result
// is the end of the block's last line of content, its newline included.
func trimTail(b []byte, start, end int) int {
	for end > start {
		ls := start + bytes.LastIndexByte(b[start:end-1], '\n') + 1
		if ls == start {
			break
		}
		line := bytes.TrimSpace(b[ls:end])
		if len(line) != 0 && line[0] != '#' {
			break
		}
		end = ls
	}
	return end
}

// Splice returns config with its state_store tables replaced by section
// (a rendered section, see Render): the first span is replaced, any later
// ones are removed, and every other byte is kept. A file without the
// section gets it appended after a blank line.
func Splice(config, section []byte) ([]byte, error) {
	spans, err := locate(config)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(config)+len(section))
	if len(spans) == 0 {
		out = append(out, config...)
		if len(out) > 0 {
			if out[len(out)-1] != '\n' {
				out = append(out, '\n')
			}
			out = append(out, '\n')
		}
		return append(out, section...), nil
	}
	out = append(out, config[:spans[0].start]...)
	out = append(out, section...)
	prev := spans[0].end
	for _, sp := range spans[1:] {
		out = append(out, config[prev:sp.start]...)
		prev = sp.end
	}
	// A section whose last line had no newline at the end of the file
	// gets the rendered section's newline; nothing else changes.
	return append(out, config[prev:]...), nil
}
