package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Severities of a problem verify reports.
const (
	// corruption: the store refuses to open (or serves less than it
	// acknowledged) until an operator decides what to drop.
	corruption = "CORRUPTION"
	// repairable: a torn final record, which was never acknowledged;
	// kpjournal repair (or the next open) cuts it.
	repairable = "REPAIRABLE"
)

// problem is one thing wrong with a store's files.
type problem struct {
	Severity string
	File     string // relative to the store directory: journal/<segment> or checkpoint-<index>.ckpt
	Offset   int64  // byte offset in File; -1 when unknown
	Index    uint64 // journal index concerned; 0 when unknown
	Reason   string
}

// problemJSON is a problem in --json output: an unknown offset or index is
// null, like every absent value.
type problemJSON struct {
	Severity string      `json:"severity"`
	File     string      `json:"file"`
	Offset   opt[int64]  `json:"offset"`
	Index    opt[uint64] `json:"index"`
	Reason   string      `json:"reason"`
}

// MarshalJSON writes the problem with null for what is unknown.
func (p problem) MarshalJSON() ([]byte, error) {
	return json.Marshal(problemJSON{p.Severity, p.File, someIf(p.Offset, p.Offset >= 0), someIf(p.Index, p.Index != 0), p.Reason})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *problem) UnmarshalJSON(b []byte) error {
	var j problemJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = problem{Severity: j.Severity, File: j.File, Offset: -1, Reason: j.Reason}
	if off, ok := j.Offset.get(); ok {
		p.Offset = off
	}
	p.Index, _ = j.Index.get()
	return nil
}

func (p problem) String() string {
	return fmt.Sprintf("%s %s offset %s index %s: %s", p.Severity, p.File, offsetText(p.Offset), indexText(p.Index), p.Reason)
}

func offsetText(off int64) string {
	if off < 0 {
		return "?"
	}
	return strconv.FormatInt(off, 10)
}

func indexText(idx uint64) string {
	if idx == 0 {
		return "?"
	}
	return strconv.FormatUint(idx, 10)
}

// problemTable prints problems as an aligned table, at most max of them
// (all when max <= 0), and says how many were left out.
func problemTable(w io.Writer, ps []problem, max int) error {
	t := newTable(w, "SEVERITY", "FILE", "OFFSET", "INDEX", "REASON")
	for i, p := range ps {
		if max > 0 && i == max {
			break
		}
		t.row(p.Severity, p.File, offsetText(p.Offset), indexText(p.Index), p.Reason)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if max > 0 && len(ps) > max {
		_, err := fmt.Fprintf(w, "... and %d more problems (--max-problems 0 lists all)\n", len(ps)-max)
		return err
	}
	return nil
}

func segFile(name string) string { return "journal/" + name }
