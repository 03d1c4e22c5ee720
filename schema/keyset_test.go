package schema

import (
	"strings"
	"testing"
)

// TestFastPathNamesEveryLength covers keyHash's cases by length: a name
// given twice, once through an escape, is never accepted, and names that
// differ in any one byte are all accepted.
func TestFastPathNamesEveryLength(t *testing.T) {
	t.Parallel()
	const head = `{"role":"subscribe","desired":true,"source_id":"x","media_kind":"video","parameters":{`
	for n := 3; n <= 70; n++ {
		name := "a." + strings.Repeat("x", n-2)
		escaped := `a\u002e` + name[2:]
		dup := []byte(head + `"` + name + `":1,"` + escaped + `":2}}`)
		if fullAccepts(dup) == nil {
			t.Fatalf("full path accepts %s", dup)
		}
		if fastAccepts(dup) {
			t.Errorf("fast path accepts a duplicate name of %d bytes", n)
		}
		var b strings.Builder
		b.WriteString(head)
		for i := 2; i < n; i++ {
			for _, c := range []byte("yz") {
				v := []byte(name)
				v[i] = c
				if b.Len() > len(head) {
					b.WriteByte(',')
				}
				b.WriteString(`"` + string(v) + `":1`)
			}
		}
		b.WriteString(`}}`)
		doc := []byte(b.String())
		if err := fullAccepts(doc); err != nil {
			t.Fatalf("full path rejects %d-byte names: %v", n, err)
		}
		if !fastAccepts(doc) {
			t.Errorf("fast path not sure of %d-byte names differing in one byte", n)
		}
	}
	// Long names, where credentialWord's buffer overflows.
	long := "cv." + strings.Repeat("zone", 20)
	if doc := []byte(head + `"` + long + `":1}}`); fullAccepts(doc) != nil || !fastAccepts(doc) {
		t.Errorf("long parameter name: full %v, fast %v", fullAccepts(doc), fastAccepts(doc))
	}
	for _, bad := range []string{long + ".api_key", long + ".", strings.ToUpper(long)} {
		if doc := []byte(head + `"` + bad + `":1}}`); fastAccepts(doc) {
			t.Errorf("fast path accepts parameter name %q", bad)
		}
	}
}
