package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"

	"github.com/keeppeek/statestore/materialize"
)

const replayAbout = `Rebuilds the state of a stopped store from its files and prints it, without changing
anything: as of the end of the journal, or as of journal index --at (from the newest checkpoint at or
below that index that loads, else from the journal's start; an index before the oldest record available
is an error). Every record is checked as the store checks it at open; damage before the index, or a
record that fails a check, stops the command (kpjournal verify lists every problem). A torn final
record is left out, as open would cut it. Prints every namespace (revision, entries, value bytes;
emptied namespaces keep their revision) and every entry.`

func runReplay(args []string, stdout, stderr io.Writer) int {
	c := newCLI("replay", "--dir DIR [--at INDEX] [--namespace NS] [flags]", replayAbout, []string{
		"kpjournal replay --dir /var/lib/keeppeek",
		"kpjournal replay --dir /var/lib/keeppeek --at 1200 --namespace service/transcoder-a",
	}, stdout, stderr)
	c.dirFlag()
	at := c.FS.Uint64("at", 0, "journal index to rebuild the state at (0: the end)")
	ns := c.FS.String("namespace", "", "print only this namespace")
	c.jsonFlag()
	c.limitFlags()
	if code := c.parse(args); code >= 0 {
		return code
	}
	if code := c.openStoreDir(); code >= 0 {
		return code
	}
	st, err := recovery.LoadState(c.dir, *at, recovery.LoadOptions{Limits: c.limits, Schemas: c.reg})
	if err != nil {
		return c.Fail(loadExit(err), "%v", err)
	}
	from := "replaying the journal from index 1"
	if st.Checkpoint.Path != "" {
		from = "using the older " + filepath.Base(st.Checkpoint.Path)
	}
	for _, err := range st.Checkpoint.Skipped {
		fmt.Fprintf(stderr, "kpjournal replay: a checkpoint does not load (%v); %s\n", err, from)
	}
	if t := st.TornTail; t != nil {
		fmt.Fprintf(stderr, "kpjournal replay: left out a torn final record at index %d (%s, offset %d): %s\n",
			t.Index, segFile(t.Segment), t.Offset, t.Reason)
	}
	out := replayOutput(c.root(), st, *ns)
	if c.json {
		err = writeJSON(stdout, out)
	} else {
		err = out.print(stdout)
	}
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	return exitOK
}

type nsRow struct {
	Namespace string `json:"namespace"`
	Revision  uint64 `json:"revision"`
	Entries   int    `json:"entries"`
	Bytes     int64  `json:"bytes"`
}

type entryRow struct {
	Namespace string      `json:"namespace"`
	Key       string      `json:"key"`
	Revision  uint64      `json:"revision"`
	Schema    string      `json:"schema"`
	Owner     string      `json:"owner"`
	ExpiresMs opt[int64]  `json:"expires_ms"` // null without a lease
	Expires   opt[string] `json:"expires"`
	Size      int64       `json:"size"`
}

type replayDoc struct {
	Store      string      `json:"store"`
	Index      uint64      `json:"index"`
	Checkpoint opt[string] `json:"checkpoint"` // image the replay started from; null: the journal's start
	Replayed   int         `json:"replayed"`
	Entries    int         `json:"entries"`
	Bytes      int64       `json:"bytes"`
	Live       int         `json:"namespaces_with_entries"`
	Overdue    int         `json:"overdue_leases"`
	Namespaces []nsRow     `json:"namespaces"`
	Rows       []entryRow  `json:"entry_list"`
}

func replayOutput(root string, st *recovery.State, only string) *replayDoc {
	d := &replayDoc{Store: root, Index: st.Index, Replayed: st.Replayed, Namespaces: []nsRow{}, Rows: []entryRow{}}
	if st.Checkpoint.Path != "" {
		d.Checkpoint = some(filepath.Base(st.Checkpoint.Path))
	}
	d.Entries, d.Bytes, d.Live = st.View.Totals()
	st.View.Namespaces(func(name string, n materialize.Namespace) bool {
		if only == "" || name == only {
			d.Namespaces = append(d.Namespaces, nsRow{name, n.Revision, n.Entries, n.Bytes})
		}
		return true
	})
	now := time.Now().UnixMilli()
	st.View.All(func(e *materialize.Entry) bool {
		if e.ExpiresMs != 0 && e.ExpiresMs <= now {
			d.Overdue++
		}
		if only == "" || e.Namespace == only {
			ms, at := leaseDeadline(e.ExpiresMs)
			d.Rows = append(d.Rows, entryRow{e.Namespace, e.Key, e.Revision, e.Schema, e.Owner, ms, at, e.Size()})
		}
		return true
	})
	return d
}

func (d *replayDoc) print(w io.Writer) error {
	from := "the journal's start"
	if ck, ok := d.Checkpoint.get(); ok {
		from = ck
	}
	fmt.Fprintf(w, "state as of index %d (%s + %d journal records): %d entries, %d bytes, %d namespaces holding entries\n\n",
		d.Index, from, d.Replayed, d.Entries, d.Bytes, d.Live)
	t := newTable(w, "NAMESPACE", "REVISION", "ENTRIES", "BYTES")
	for _, n := range d.Namespaces {
		t.row(n.Namespace, n.Revision, n.Entries, n.Bytes)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "NAMESPACE", "KEY", "REVISION", "SCHEMA", "OWNER", "EXPIRES", "SIZE")
	for _, e := range d.Rows {
		t.row(e.Namespace, e.Key, e.Revision, e.Schema, e.Owner, expiresText(e.ExpiresMs.val), e.Size)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if d.Overdue > 0 {
		_, err := fmt.Fprintf(w, "\n%d leases are overdue: the store purges them (journaling an EXPIRE each) when it opens\n", d.Overdue)
		return err
	}
	return nil
}

// loadExit is the exit code for a failure of recovery.LoadState: damage
// or a record that fails a check is a problem found (1); an index the
// files cannot reach, or files that cannot be read, is a usage error (2).
func loadExit(err error) int {
	var ce *journal.CorruptError
	var nc *recovery.NoCheckpointError
	if errors.As(err, &ce) || errors.As(err, &nc) {
		return exitProblems
	}
	return exitUsage
}
