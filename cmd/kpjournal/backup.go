package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/journal"
)

const backupAbout = `Writes a backup of a stopped store to one file (or to stdout with --out -), without
changing the store: its journal and checkpoints are copied to a temporary directory and opened there as
the media server opens a store (replaying and validating everything, cutting a torn final record and
purging overdue leases, in the copy only), and the store's online backup, a checkpoint image of the
state at one journal index, is written through a temporary file renamed into place. Prints the index,
entries and value bytes the backup holds. kpjournal restore (or Store.Restore) brings it back.`

func runBackup(args []string, stdout, stderr io.Writer) int {
	c := newCLI("backup", "--dir DIR --out FILE|- [flags]", backupAbout, []string{
		"kpjournal backup --dir /var/lib/keeppeek --out /backup/state-$(date +%F).kpbak",
		"kpjournal backup --dir /var/lib/keeppeek --out - | ssh vault 'cat > state.kpbak'",
	}, stdout, stderr)
	c.dirFlag()
	out := c.FS.String("out", "", "file to write, or - for stdout")
	c.jsonFlag()
	c.limitFlags()
	if code := c.parse(args); code >= 0 {
		return code
	}
	if *out == "" {
		return c.UsageError("--out is required")
	}
	if *out == "-" && c.json {
		return c.UsageError("--json and --out - both write stdout")
	}
	if code := c.openStoreDir(); code >= 0 {
		return code
	}
	tmp, err := os.MkdirTemp("", "kpjournal-backup-")
	if err != nil {
		return c.Fail(exitUsage, "%v", err)
	}
	defer os.RemoveAll(tmp)
	if err := copyStore(c.root(), filepath.Join(tmp, statestore.StoreDirName)); err != nil {
		return c.Fail(exitUsage, "copy the store: %v", err)
	}
	// The throwaway copy takes no writes, so it needs no reserve.
	s, err := statestore.Open(statestore.Options{Dir: tmp, Limits: c.limits, CheckpointBytes: -1, ReserveBytes: -1})
	if err != nil {
		return c.Fail(exitProblems, "%v", err)
	}
	open := s.OpenReport()
	var head headWriter
	write := func(w io.Writer) error { return s.Backup(io.MultiWriter(w, &head)) }
	if *out == "-" {
		err = write(stdout)
	} else {
		err = disk.WriteAtomic(*out, write)
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return c.Fail(exitUsage, "write backup: %v", err)
	}
	h, err := checkpoint.ReadHeader(bytes.NewReader(head.b))
	if err != nil {
		return c.Fail(exitUsage, "read back the backup header: %v", err)
	}
	doc := backupDoc{File: *out, Index: h.Index, Time: msTime(h.TimeMs), Entries: h.Entries, Bytes: h.Bytes, Namespaces: h.Namespaces,
		Size: head.n, Expired: open.Expired}
	if cut := open.TailCut; cut != nil {
		// The cut happened in the temporary copy, which is gone: name what
		// was left out, not where the copy kept it. The store's own files
		// still hold the torn record (kpjournal repair cuts it).
		doc.TailCut = some(fmt.Sprintf("segment %s at offset %d (index %d, %d bytes: %s); the store's own files are unchanged",
			cut.Segment, cut.Offset, cut.Index, cut.Bytes, cut.Reason))
	}
	if c.json {
		if err := writeJSON(stdout, doc); err != nil {
			return c.Fail(exitUsage, "%v", err)
		}
		return exitOK
	}
	w := stdout
	if *out == "-" {
		w = stderr
	}
	doc.print(w)
	return exitOK
}

type backupDoc struct {
	File       string      `json:"file"`
	Index      uint64      `json:"index"`
	Time       string      `json:"time"`
	Entries    uint32      `json:"entries"`
	Bytes      uint64      `json:"bytes"`
	Namespaces uint32      `json:"namespaces"`
	Size       int64       `json:"size"`
	Expired    int         `json:"overdue_leases_left_out"`
	TailCut    opt[string] `json:"torn_tail_left_out"` // null: none was cut
}

func (d backupDoc) print(w io.Writer) {
	if cut, ok := d.TailCut.get(); ok {
		fmt.Fprintf(w, "left out a torn final record: %s\n", cut)
	}
	if d.Expired > 0 {
		fmt.Fprintf(w, "left out %d overdue leases (opening the store purges them)\n", d.Expired)
	}
	fmt.Fprintf(w, "backup of index %d (%s): %d entries, %d bytes, %d namespaces; %d bytes written to %s\n",
		d.Index, d.Time, d.Entries, d.Bytes, d.Namespaces, d.Size, d.File)
}

// headWriter keeps the first bytes written (the image header) and counts all.
type headWriter struct {
	b []byte
	n int64
}

func (h *headWriter) Write(p []byte) (int, error) {
	if room := 64 - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	h.n += int64(len(p))
	return len(p), nil
}

// copyStore copies what opening a store reads: the journal directory's
// files and the checkpoint images (not the LOCK, the quarantine or the
// journal's reserve, which holds no data).
func copyStore(from, to string) error {
	if err := os.MkdirAll(filepath.Join(to, "journal"), 0o755); err != nil {
		return err
	}
	jents, err := os.ReadDir(filepath.Join(from, "journal"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range jents {
		if e.Type().IsRegular() && e.Name() != journal.ReserveFile {
			if err := copyFile(filepath.Join(from, "journal", e.Name()), filepath.Join(to, "journal", e.Name())); err != nil {
				return err
			}
		}
	}
	files, err := checkpoint.List(from)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := copyFile(f.Path, filepath.Join(to, filepath.Base(f.Path))); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

const restoreAbout = `Builds a store from a backup in a directory that holds no store yet; it writes. The
backup is decoded and checked against every bound and rule before anything is written, each document
against its schema and the content guard; a damaged backup, one from a newer format, one over the bounds
or one holding a document the rules refuse changes nothing (exit 1). It refuses a directory whose store
already holds a journal or checkpoints (exit 2): restore into an empty directory, or into the running
store (Store.Restore). The store then holds the backup's state, namespace revisions and entry revisions,
at the backup's journal index.`

func runRestore(args []string, stdout, stderr io.Writer) int {
	c := newCLI("restore", "--in FILE|- --dir DIR [flags]", restoreAbout, []string{
		"kpjournal restore --in /backup/state-2025-06-01.kpbak --dir /var/lib/keeppeek-new",
	}, stdout, stderr)
	in := c.FS.String("in", "", "backup file to read, or - for stdin")
	c.dirFlag()
	c.jsonFlag()
	c.limitFlags()
	if code := c.parse(args); code >= 0 {
		return code
	}
	if *in == "" {
		return c.UsageError("--in is required")
	}
	if code := c.checkDir(true); code >= 0 {
		return code
	}
	if code := c.checkNotLive(); code >= 0 {
		return code
	}
	var r io.Reader = os.Stdin
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			return c.Fail(exitUsage, "%v", err)
		}
		defer f.Close()
		r = f
	}
	var head headWriter
	err := statestore.RestoreDir(c.dir, io.TeeReader(r, &head), c.limits)
	if err != nil {
		var se *statestore.Error
		if errors.As(err, &se) && se.Field == "backup" {
			return c.Fail(exitProblems, "%s is not a usable backup, nothing written: %v", *in, err)
		}
		if errors.As(err, &se) && se.Field == "dir" && se.Code == statestore.InvalidArgument {
			return c.Fail(exitUsage, "refusing to restore into %s: %s", c.dir, se.Message)
		}
		return c.Fail(exitUsage, "%v", err)
	}
	h, err := checkpoint.ReadHeader(bytes.NewReader(head.b))
	if err != nil {
		return c.Fail(exitUsage, "read the backup header: %v", err)
	}
	doc := backupDoc{File: *in, Index: h.Index, Time: msTime(h.TimeMs), Entries: h.Entries, Bytes: h.Bytes, Namespaces: h.Namespaces, Size: head.n}
	if c.json {
		if err := writeJSON(stdout, struct {
			Store string `json:"store"`
			backupDoc
		}{c.root(), doc}); err != nil {
			return c.Fail(exitUsage, "%v", err)
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "restored %s into %s: index %d (%s), %d entries, %d bytes, %d namespaces\n",
		*in, c.root(), h.Index, doc.Time, h.Entries, h.Bytes, h.Namespaces)
	return exitOK
}
