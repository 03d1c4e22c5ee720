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

// TestFreePortsAvoidTheEphemeralRange: on a kernel whose ephemeral range
// leaves room below it, every port picked lies below it, where no dial
// or port-0 listener of another process can take it.
func TestFreePortsAvoidTheEphemeralRange(t *testing.T) {
	t.Parallel()
	low := ephemeralLow()
	if _, ok := pickable(low); !ok {
		t.Skipf("ephemeral range starts at %d: no room below it", low)
	}
	ports, err := FreePorts(16)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p < minPort || p >= low {
			t.Errorf("port %d outside [%d, %d)", p, minPort, low)
		}
	}
}

func TestPickable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		hi   int
		ok   bool
	}{
		{"32768\t60999\n", 32768, true},
		{"11000 60999", 11000, true},
		{"10999 60999", 0, false}, // fewer than minSpan ports above minPort
		{"1024 65535", 0, false},
	} {
		low, err := parseLow(c.text)
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		if hi, ok := pickable(low); hi != c.hi || ok != c.ok {
			t.Errorf("%q: pickable = %d, %v; want %d, %v", c.text, hi, ok, c.hi, c.ok)
		}
	}
	if _, err := parseLow("garbage"); err == nil {
		t.Error(`parseLow("garbage"): no error`)
	}
}
