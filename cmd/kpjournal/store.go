package main

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/keeppeek/statestore/checkpoint"
	"github.com/keeppeek/statestore/internal/recovery"
	"github.com/keeppeek/statestore/journal"
	"github.com/keeppeek/statestore/materialize"
)

// ckpt is one checkpoint file and, once loaded, its image.
type ckpt struct {
	checkpoint.File
	Size   int64
	Header checkpoint.Header
	View   *materialize.View // nil until loaded, or when it failed to load
	Err    error             // why the header or image is refused
	Offset int64             // file offset of the damage, -1 if unknown
}

// listCheckpoints lists the store's checkpoint files (oldest first) with
// their sizes and headers; it loads no image.
func listCheckpoints(root string) ([]*ckpt, error) {
	files, err := checkpoint.List(root)
	if err != nil {
		return nil, err
	}
	out := make([]*ckpt, 0, len(files))
	for _, f := range files {
		c := &ckpt{File: f, Offset: -1}
		if fi, err := os.Stat(f.Path); err == nil {
			c.Size = fi.Size()
		}
		fh, err := os.Open(f.Path)
		if err != nil {
			return nil, err
		}
		c.Header, c.Err = checkpoint.ReadHeader(fh)
		fh.Close()
		c.note(c.Err)
		out = append(out, c)
	}
	return out, nil
}

func (c *ckpt) note(err error) {
	if err == nil {
		return
	}
	c.Err = err
	var ce *checkpoint.Error
	if errors.As(err, &ce) {
		c.Offset = ce.Offset
	}
}

// load decodes the image as Open does (recovery.Checker.LoadImage). An
// image refused only for a document (a *recovery.DocumentError) keeps its
// View: Open refuses there, yet its state is whole, so verify checks the
// journal after it.
func (c *ckpt) load(chk *recovery.Checker) error {
	if c.View != nil {
		return c.Err
	}
	h, v, err := chk.LoadImage(c.File)
	if v != nil {
		c.Header, c.View, c.Err = h, v, nil
	}
	c.note(err)
	return err
}

// base reports whether Open starts from this image once it is loaded,
// when no newer one is: it loads, or it is intact and only a document
// fails, so Open refuses at it rather than fall back from it.
func (c *ckpt) base() bool {
	var de *recovery.DocumentError
	return c.View != nil && (c.Err == nil || errors.As(c.Err, &de))
}

// journalSize is the total size of the segment files.
func journalSize(segs []journal.Segment) int64 {
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	return n
}

// listSegments lists the journal's segments; a missing journal directory
// is an empty journal.
func listSegments(dir string) ([]journal.Segment, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return journal.ListSegments(dir)
}

// Name is the checkpoint's file name.
func (c *ckpt) Name() string { return filepath.Base(c.Path) }
