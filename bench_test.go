package statestore_test

import (
	"fmt"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
)

// BenchmarkCASNoSync measures the serial compare-and-set path without the
// disk: admission, journal encoding, apply and reply.
func BenchmarkCASNoSync(b *testing.B) {
	f := newFixture(b, func(o *statestore.Options) { o.NoSync = true })
	const owners = 127
	docs := make([][]byte, owners)
	revs := make([]uint64, owners)
	for i := range docs {
		docs[i] = testdoc.MediaIntent(2193, i)
	}
	b.SetBytes(2193)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		o := i % owners
		p := statestore.Principal{ID: fmt.Sprintf("owner-%03d", o)}
		x := statestore.CreateOnly
		if revs[o] != 0 {
			x = statestore.IfRevision(revs[o])
		}
		e, err := f.put(p, "user/"+p.ID, "intent", docs[o], x)
		if err != nil {
			b.Fatal(err)
		}
		revs[o] = e.Revision
	}
}
