// Package loopback picks addresses on 127.0.0.1 for the servers a test or
// a benchmark starts, when each must be told the others' addresses before
// any of them listens (a cluster's members), so a port 0 of its own does
// not do.
//
// # Invariants
//
//  1. The n addresses are distinct and were free when picked: all are
//     listened on at once, so the kernel cannot hand one out twice.
//     Another process may still take one before its server listens; the
//     callers' clusters then fail to start, and say which address.
//     Code: FreePorts, FreeAddrs.
//     Tests: TestFreeAddrsAreDistinctAndFree.
package loopback

import (
	"fmt"
	"net"
	"strconv"
)

// FreePorts returns n distinct ports on 127.0.0.1 that were free.
func FreePorts(n int) ([]int, error) {
	var out []int
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("loopback: pick port %d of %d: %w", i+1, n, err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// FreeAddrs returns n distinct host:port addresses on 127.0.0.1 that were
// free.
func FreeAddrs(n int) ([]string, error) {
	ports, err := FreePorts(n)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i, p := range ports {
		out[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return out, nil
}
