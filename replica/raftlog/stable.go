package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/keeppeek/statestore/internal/disk"
	"github.com/keeppeek/statestore/internal/fault"
)

// The stable store's file. raft keeps a handful of keys in it (the current
// term, the last vote's term and candidate), each written at a vote or a
// term change, so the whole file is rewritten each time, through
// disk.WriteAtomic (a synced temporary renamed over it, the directory
// synced): a crash leaves the old file or the new one, never a mix. All
// integers little-endian:
//
//	 offset  size  field
//	+------+------+-----------------------------------------------+
//	|   0  |   4  | magic "KPSS"                                  |
//	|   4  |   1  | version (1)                                   |
//	|   5  |   4  | number of pairs N                             |
//	|   9  |      | N pairs, keys in byte order, each:            |
//	|      |   4  |   key length K                                |
//	|      |   4  |   value length V                              |
//	|      |   K  |   key                                         |
//	|      |   V  |   value                                       |
//	| end-4|   4  | CRC-32C (Castagnoli) of every byte before it  |
//	+------+------+-----------------------------------------------+
//
// A Uint64 value is its 8 bytes, little-endian.

const (
	stableMagic   = "KPSS"
	stableVersion = 1
	stableHeader  = 4 + 1 + 4
	// maxStableBytes bounds what Open reads: raft stores a few short keys.
	maxStableBytes = 1 << 20
)

// ErrStableCorrupt is wrapped by a *StableCorruptError.
var ErrStableCorrupt = errors.New("raftlog: stable store corrupt")

// StableCorruptError is a stable-store file that fails its checks: raft's
// term and vote are unknown, so the node must not start (an empty store
// would let it vote twice in a term).
type StableCorruptError struct {
	Path   string
	Offset int64 // where the file stopped making sense; -1 for the whole file
	Reason string
}

func (e *StableCorruptError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("raftlog: stable store %s corrupt: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("raftlog: stable store %s corrupt at offset %d: %s", e.Path, e.Offset, e.Reason)
}

// Unwrap returns ErrStableCorrupt.
func (e *StableCorruptError) Unwrap() error { return ErrStableCorrupt }

// StableStore is raft's StableStore in one checksummed file, replaced
// atomically on every Set. Safe for concurrent use.
type StableStore struct {
	mu   sync.Mutex
	path string
	fs   disk.FS
	kv   map[string][]byte
}

var _ raft.StableStore = (*StableStore)(nil)

// OpenStable opens the stable store in the file at path (absent: empty).
// A file that fails its checks is a *StableCorruptError, never an empty
// store. faults is the test seam of the file's fsyncs (nil in real use).
func OpenStable(path string, faults *fault.Hooks) (*StableStore, error) {
	s := &StableStore{path: path, fs: disk.FS{Faults: faults}, kv: map[string][]byte{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raftlog: open stable store: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStableBytes+1))
	if err != nil {
		return nil, fmt.Errorf("raftlog: read stable store %s: %w", path, err)
	}
	kv, cerr := decodeStable(b)
	if cerr != nil {
		cerr.Path = path
		return nil, cerr
	}
	s.kv = kv
	return s, nil
}

func decodeStable(b []byte) (map[string][]byte, *StableCorruptError) {
	bad := func(off int, format string, args ...any) *StableCorruptError {
		return &StableCorruptError{Offset: int64(off), Reason: fmt.Sprintf(format, args...)}
	}
	if len(b) > maxStableBytes {
		return nil, bad(-1, "larger than %d bytes", maxStableBytes)
	}
	if len(b) < stableHeader+4 {
		return nil, bad(0, "%d bytes cannot hold the header and checksum", len(b))
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return nil, bad(len(body), "stored CRC-32C %08x, computed %08x", want, got)
	}
	if string(b[:4]) != stableMagic {
		return nil, bad(0, "magic %q, want %q", b[:4], stableMagic)
	}
	if b[4] != stableVersion {
		return nil, bad(4, "version %d, this build reads %d", b[4], stableVersion)
	}
	n := binary.LittleEndian.Uint32(b[5:])
	kv := make(map[string][]byte, min(n, 64))
	off := stableHeader
	for i := uint32(0); i < n; i++ {
		if len(body)-off < 8 {
			return nil, bad(off, "pair %d of %d: header runs past the end", i, n)
		}
		k := uint64(binary.LittleEndian.Uint32(body[off:]))
		v := uint64(binary.LittleEndian.Uint32(body[off+4:]))
		if uint64(len(body)-off-8) < k+v {
			return nil, bad(off, "pair %d of %d: %d+%d bytes run past the end", i, n, k, v)
		}
		key := string(body[off+8 : off+8+int(k)])
		if _, dup := kv[key]; dup {
			return nil, bad(off, "key %q twice", key)
		}
		kv[key] = slices.Clone(body[off+8+int(k) : off+8+int(k+v)])
		off += 8 + int(k+v)
	}
	if off != len(body) {
		return nil, bad(off, "%d bytes after the last pair", len(body)-off)
	}
	return kv, nil
}

func encodeStable(kv map[string][]byte) []byte {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := append([]byte(stableMagic), stableVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(kv[k])))
		b = append(b, k...)
		b = append(b, kv[k]...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Set stores val under key, durably, before it returns; on failure the
// store (file and memory) keeps the old value.
func (s *StableStore) Set(key []byte, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string][]byte, len(s.kv)+1)
	for k, v := range s.kv {
		next[k] = v
	}
	next[string(key)] = slices.Clone(val)
	b := encodeStable(next)
	if len(b) > maxStableBytes {
		return fmt.Errorf("raftlog: stable store set %q: the file would be %d bytes, the bound is %d", key, len(b), maxStableBytes)
	}
	if err := s.fs.WriteAtomic(s.path, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return fmt.Errorf("raftlog: stable store set %q: %w", key, err)
	}
	s.kv = next
	return nil
}

// Get returns the value under key, or an empty slice when there is none
// (raft's StableStore contract).
func (s *StableStore) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.kv[string(key)]), nil
}

// SetUint64 stores val under key as 8 bytes.
func (s *StableStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.LittleEndian.AppendUint64(nil, val))
}

// GetUint64 returns the number under key, 0 when there is none, and an
// error naming the key when its value is not 8 bytes.
func (s *StableStore) GetUint64(key []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kv[string(key)]
	if !ok {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftlog: stable store key %q holds %d bytes, not a uint64's 8", key, len(v))
	}
	return binary.LittleEndian.Uint64(v), nil
}
