package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sys/unix"
)

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(toAny(header)...)
	}
	return t
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// row writes one row; cells are formatted with %v.
func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	io.WriteString(t.tw, "\n")
}

func (t *table) flush() error { return t.tw.Flush() }

// writeJSON prints v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// msTime formats a Unix ms timestamp as RFC 3339 with milliseconds, UTC.
func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// expiresText is an entry's lease deadline, or "-" without a lease.
func expiresText(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return msTime(ms)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress draws a percentage bar (schollz/progressbar) on a terminal;
// elsewhere (pipes, files, tests) it draws nothing. A failed write of the
// bar is ignored: it must never fail the command whose progress it shows.
type progress struct{ bar *progressbar.ProgressBar }

// startProgress starts a progress display of total units on w, if w is a
// terminal. Call add as work completes and finish at the end.
func startProgress(w io.Writer, label string, total int64) *progress {
	return &progress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetVisibility(isTerminal(w) && total > 0),
		progressbar.OptionSetDescription(label),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish())}
}

func (p *progress) add(n int64) { _ = p.bar.Add64(n) }

func (p *progress) finish() { _ = p.bar.Finish() }

// opt is a report value that may be absent. --json writes an absent one
// as null, never leaving the key out nor writing "-", so every report of a
// command has the same keys whatever the store holds and a consumer tests
// for null in one way everywhere.
type opt[T any] struct {
	val T
	ok  bool
}

// some is a present value.
func some[T any](v T) opt[T] { return opt[T]{val: v, ok: true} }

// someIf is v when present is true, else absent.
func someIf[T any](v T, present bool) opt[T] { return opt[T]{val: v, ok: present} }

// get returns the value and whether it is present.
func (o opt[T]) get() (T, bool) { return o.val, o.ok }

// MarshalJSON writes the value, or null when absent.
func (o opt[T]) MarshalJSON() ([]byte, error) {
	if !o.ok {
		return []byte("null"), nil
	}
	return json.Marshal(o.val)
}

// UnmarshalJSON reads null as absent.
func (o *opt[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*o = opt[T]{}
		return nil
	}
	o.ok = true
	return json.Unmarshal(b, &o.val)
}

// leaseDeadline is an entry's lease deadline for a report: absent (null
// in --json) without a lease.
func leaseDeadline(ms int64) (opt[int64], opt[string]) {
	return someIf(ms, ms != 0), someIf(msTime(ms), ms != 0)
}

// indexRange writes an inclusive journal index range, and "none" for an
// empty one (a journal whose next index is first but holds no record).
func indexRange(first, last uint64) string {
	if last < first {
		return "none"
	}
	return fmt.Sprintf("%d..%d", first, last)
}
