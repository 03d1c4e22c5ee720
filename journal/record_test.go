package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
)

func sampleRecords() []*Record {
	return []*Record{
		{Kind: KindPut, Namespace: "user/alice", Key: "prefs/layout", Revision: 1, TimeMs: 1700000000000,
			Schema: "keeppeek.media-intent.v1", Owner: "alice", CreatedMs: 1700000000000, UpdatedMs: 1700000000000,
			Document: []byte(`{"role":"subscribe"}`)},
		{Kind: KindPut, Namespace: "service/transcoder-a", Key: "leases/front-door", Revision: 7, TimeMs: 5,
			Schema: "keeppeek.media-intent.v1", Owner: "admin", CreatedMs: 1, UpdatedMs: 5, ExpiresMs: 65,
			Document: []byte(`{}`)},
		{Kind: KindDelete, Namespace: "group/g1", Key: "k", Revision: 2, TimeMs: 9},
		{Kind: KindExpire, Namespace: "system", Key: "a/b", Revision: 1 << 40, TimeMs: -1},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	for _, r := range sampleRecords() {
		t.Run(r.Kind.String(), func(t *testing.T) {
			frame, err := r.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if len(frame) != r.EncodedSize() {
				t.Fatalf("EncodedSize %d, frame %d bytes", r.EncodedSize(), len(frame))
			}
			got, err := Decode(frame, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind == KindPut && got.Document == nil {
				got.Document = []byte{}
			}
			if !reflect.DeepEqual(got, r) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
			}
			// The decoded document must not alias the frame.
			if r.Kind == KindPut && len(frame) > 0 {
				frame[len(frame)-5] ^= 0xFF
				if !bytes.Equal(got.Document, r.Document) {
					t.Fatal("decoded document aliases the frame")
				}
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	put := sampleRecords()[0]
	good, _ := put.Encode()
	tests := []struct {
		name  string
		frame func() []byte
		lim   Limits
		field string
	}{
		{"short", func() []byte { return good[:10] }, DefaultLimits, "length"},
		{"crc", func() []byte { b := bytes.Clone(good); b[30] ^= 1; return b }, DefaultLimits, "crc"},
		{"version", func() []byte { return reframe(good, func(b []byte) { b[0] = 2 }) }, DefaultLimits, "version"},
		{"kind", func() []byte { return reframe(good, func(b []byte) { b[1] = 9 }) }, DefaultLimits, "kind"},
		{"namespace over limit", func() []byte { return good }, Limits{MaxNamespace: 3, MaxKey: 256, MaxSchema: 128, MaxOwner: 128, MaxDocument: 100}, "namespace length"},
		{"key over limit", func() []byte { return good }, Limits{MaxNamespace: 128, MaxKey: 3, MaxSchema: 128, MaxOwner: 128, MaxDocument: 100}, "key length"},
		{"document over limit", func() []byte { return good }, Limits{MaxNamespace: 128, MaxKey: 256, MaxSchema: 128, MaxOwner: 128, MaxDocument: 5}, "document length"},
		{"declared length mismatch", func() []byte {
			docLenAt := headerSize + len(put.Namespace) + len(put.Key) + 28
			return reframe(good, func(b []byte) { b[docLenAt] ^= 0x01 })
		}, DefaultLimits, "length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.frame(), tc.lim)
			var fe *FrameError
			if !errors.As(err, &fe) || !errors.Is(err, ErrFrame) {
				t.Fatalf("want *FrameError, got %v", err)
			}
			if fe.Field != tc.field {
				t.Fatalf("field %q, want %q (%v)", fe.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("message %q does not name %q", err, tc.field)
			}
		})
	}
}

// reframe edits a frame's body and recomputes its CRC, to reach the checks
// that come after the checksum.
func reframe(frame []byte, edit func([]byte)) []byte {
	b := bytes.Clone(frame[:len(frame)-crcSize])
	edit(b)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestPlausibleFrameMatchesDecode(t *testing.T) {
	t.Parallel()
	for _, r := range sampleRecords() {
		frame, _ := r.Encode()
		if !PlausibleFrame(frame, DefaultLimits) {
			t.Fatalf("%v frame judged implausible", r.Kind)
		}
		// Any single-byte change in a length field or the size itself
		// must make it implausible or undecodable, never accepted by
		// one and refused as implausible by the other in the wrong way.
		for i := range frame {
			b := bytes.Clone(frame)
			b[i] ^= 0x10
			if _, err := Decode(b, DefaultLimits); err == nil && !PlausibleFrame(b, DefaultLimits) {
				t.Fatalf("byte %d: decodable but implausible", i)
			}
		}
		if PlausibleFrame(frame[:len(frame)-1], DefaultLimits) {
			t.Fatal("a frame one byte short is plausible")
		}
	}
}
