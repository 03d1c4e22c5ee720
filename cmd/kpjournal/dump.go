package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/keeppeek/statestore/journal"
)

const dumpAbout = `Prints the journal records of a stopped store, in index order, without changing anything:
index, segment file, byte offset, kind, namespace, key, the namespace revision the record produced and
its commit time, and for a PUT its schema, owner, lease deadline and document size. --from and --to
bound the range (inclusive; default: everything). --documents adds each PUT's JSON document. Damaged
entries are reported on stderr (and under "problems" with --json) and the dump goes on past them; the
exit code is then 1.

On a cluster node (the directory holds raft-stable) it prints raft's log: each entry's index,
segment and offset, term, type, size and the commit index staged with it, the records of a store
command decoded under it (kind, namespace, key, revision, time, document size, and the document
under --documents), and then the persisted commit floor. --from and --to are raft indexes.`

func runDump(args []string, stdout, stderr io.Writer) int {
	c := newCLI("dump", "--dir DIR [--from INDEX] [--to INDEX] [--documents] [flags]", dumpAbout, []string{
		"kpjournal dump --dir /var/lib/keeppeek --from 1200 --to 1250",
		"kpjournal dump --dir /var/lib/keeppeek --documents --json | jq '.records[] | select(.kind == \"EXPIRE\")'",
	}, stdout, stderr)
	c.clusterOK = true
	c.dirFlag()
	from := c.FS.Uint64("from", 0, "first journal index to print (0: the first record)")
	to := c.FS.Uint64("to", 0, "last journal index to print (0: the last record)")
	docs := c.FS.Bool("documents", false, "include each PUT's JSON document")
	c.jsonFlag()
	c.limitFlags()
	config := c.configFlag()
	if code := c.parse(args); code >= 0 {
		return code
	}
	if *to != 0 && *from > *to {
		return c.UsageError("--from %d is after --to %d", *from, *to)
	}
	if code := c.openStoreDir(); code >= 0 {
		return code
	}
	if isClusterNode(c.root()) {
		if *config != "" {
			return c.UsageError("--config: a cluster node has no settings-backed namespaces (they are refused in cluster mode)")
		}
		return dumpCluster(c, stdout, stderr, *from, *to, *docs)
	}
	chk := c.chk
	segs, err := listSegments(c.journalDir())
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	floor, _, err := ackFloor(c.root(), c.journalDir())
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	bw := bufio.NewWriterSize(stdout, 64<<10)
	out := newDumpWriter(bw, c.json, *docs, c.root())
	var problems []problem
	prog := startProgress(stderr, "dump", journalSize(segs))
	err = walkJournal(segs, chk.JournalLimits(), floor, max(*from, 1), *to, prog, func(seg journal.Segment, it *item, f *journal.Frame) error {
		return out.record(seg, it, f)
	}, func(p problem, torn bool) error {
		if torn {
			p.Reason += ": torn final record, never acknowledged (kpjournal repair cuts it)"
		}
		problems = append(problems, p)
		fmt.Fprintf(stderr, "kpjournal dump: %s\n", p)
		return nil
	})
	prog.finish()
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if *config != "" {
		if out.settings, err = loadSettings(*config, chk, true, *docs); err != nil {
			p := settingsProblem(*config, err)
			problems = append(problems, p)
			fmt.Fprintf(stderr, "kpjournal dump: %s\n", p)
		}
	}
	if err := out.finish(problems); err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if err := bw.Flush(); err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	if out.n == 0 && len(problems) == 0 {
		fmt.Fprintln(stderr, "kpjournal dump: no records in the range")
	}
	if len(problems) > 0 {
		return exitProblems
	}
	return exitOK
}

// dumpRecord is one record in --json output.
type dumpRecord struct {
	Index     uint64 `json:"index"`
	Segment   string `json:"segment"`
	Offset    int64  `json:"offset"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Revision  uint64 `json:"revision"`
	TimeMs    int64  `json:"time_ms"`
	Time      string `json:"time"`
	// The rest describe a PUT's entry: null for DELETE and EXPIRE, the
	// lease fields null without a lease, document null without --documents.
	Schema    opt[string]          `json:"schema"`
	Owner     opt[string]          `json:"owner"`
	ExpiresMs opt[int64]           `json:"expires_ms"`
	Expires   opt[string]          `json:"expires"`
	Size      opt[int]             `json:"size"`
	Document  opt[json.RawMessage] `json:"document"`
}

// dumpWriter streams records as an aligned table (flushed every few
// thousand rows, so memory stays bounded) or as one JSON document.
type dumpWriter struct {
	w     io.Writer
	json  bool
	docs  bool
	store string
	n     int
	t     *table
	// settings are config.toml's settings-backed entries (--config),
	// printed after the journal's records.
	settings *settingsDoc
}

const dumpTableRows = 4096

func newDumpWriter(w io.Writer, asJSON, docs bool, store string) *dumpWriter {
	return &dumpWriter{w: w, json: asJSON, docs: docs, store: store}
}

func (d *dumpWriter) header() *table {
	cols := []string{"INDEX", "SEGMENT", "OFFSET", "KIND", "NAMESPACE", "KEY", "REVISION", "TIME", "SCHEMA", "OWNER", "EXPIRES", "SIZE"}
	if d.docs {
		cols = append(cols, "DOCUMENT")
	}
	return newTable(d.w, cols...)
}

func (d *dumpWriter) record(seg journal.Segment, it *item, f *journal.Frame) error {
	if d.json {
		return d.jsonRecord(seg, it, f)
	}
	if d.t == nil {
		d.t = d.header()
	}
	cells := []any{it.index, seg.Name(), it.offset, f.Kind, string(f.Namespace), string(f.Key), f.Revision, msTime(f.TimeMs)}
	if f.Kind == journal.KindPut {
		cells = append(cells, string(f.Schema), string(f.Owner), expiresText(f.ExpiresMs), len(f.Document))
	} else {
		cells = append(cells, "-", "-", "-", "-")
	}
	if d.docs {
		doc := "-"
		if f.Kind == journal.KindPut {
			doc = documentText(f.Document)
		}
		cells = append(cells, doc)
	}
	d.t.row(cells...)
	d.n++
	if d.n%dumpTableRows == 0 {
		return d.t.flush()
	}
	return nil
}

func (d *dumpWriter) jsonRecord(seg journal.Segment, it *item, f *journal.Frame) error {
	if d.n == 0 {
		fmt.Fprintf(d.w, "{\n  \"store\": %s,\n  \"records\": [\n    ", strconv.Quote(d.store))
	} else {
		io.WriteString(d.w, ",\n    ")
	}
	r := dumpRecord{Index: it.index, Segment: seg.Name(), Offset: it.offset, Kind: f.Kind.String(),
		Namespace: string(f.Namespace), Key: string(f.Key), Revision: f.Revision, TimeMs: f.TimeMs, Time: msTime(f.TimeMs)}
	if f.Kind == journal.KindPut {
		r.Schema, r.Owner, r.Size = some(string(f.Schema)), some(string(f.Owner)), some(len(f.Document))
		r.ExpiresMs, r.Expires = leaseDeadline(f.ExpiresMs)
		if d.docs {
			r.Document = some(documentJSON(f.Document))
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	d.n++
	_, err = d.w.Write(b)
	return err
}

func (d *dumpWriter) finish(problems []problem) error {
	if !d.json {
		if d.t == nil {
			d.t = d.header()
		}
		if err := d.t.flush(); err != nil || d.settings == nil {
			return err
		}
		return d.settings.print(d.w, d.docs)
	}
	if d.n == 0 {
		fmt.Fprintf(d.w, "{\n  \"store\": %s,\n  \"records\": [", strconv.Quote(d.store))
	} else {
		io.WriteString(d.w, "\n  ")
	}
	if problems == nil {
		problems = []problem{}
	}
	b, err := json.Marshal(problems)
	if err != nil {
		return err
	}
	if d.settings != nil {
		sb, err := json.Marshal(d.settings)
		if err != nil {
			return err
		}
		fmt.Fprintf(d.w, "],\n  \"settings\": %s,\n  \"problems\": %s\n}\n", sb, b)
		return nil
	}
	_, err = fmt.Fprintf(d.w, "],\n  \"problems\": %s\n}\n", b)
	return err
}

// documentText is a document on one line: compacted JSON, or quoted bytes
// when it is not JSON.
func documentText(doc []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, doc) == nil {
		return b.String()
	}
	return strconv.Quote(string(doc))
}

// documentJSON embeds a document in JSON output: as itself when it is JSON,
// as a string otherwise.
func documentJSON(doc []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, doc) == nil {
		return b.Bytes()
	}
	q, _ := json.Marshal(string(doc))
	return q
}
