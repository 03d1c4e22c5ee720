package loopback

import (
	"net"
	"testing"
)

func TestFreeAddrsAreDistinctAndFree(t *testing.T) {
	t.Parallel()
	addrs, err := FreeAddrs(32)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 32 {
		t.Fatalf("%d addresses, want 32", len(addrs))
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s handed out twice in %v", a, addrs)
		}
		seen[a] = true
		// Free once returned: a server can listen there.
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s is not free: %v", a, err)
		}
		ln.Close()
	}
}
