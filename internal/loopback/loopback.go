// Package loopback picks addresses on 127.0.0.1 for the servers a test or
// a benchmark starts, when each must be told the others' addresses before
// any of them listens (a cluster's members), so a port 0 of its own does
// not do.
//
// # Invariants
//
//  1. The n addresses are distinct and were free when picked: all are
//     listened on at once, so the kernel cannot hand one out twice.
//     Code: FreePorts, FreeAddrs.
//     Tests: TestFreeAddrsAreDistinctAndFree.
//  2. The ports lie below the kernel's ephemeral range
//     (net.ipv4.ip_local_port_range) whenever at least 1,000 ports above
//     10,000 are there: the kernel hands ephemeral ports to every
//     outgoing connection and every port-0 listener of any process, so a
//     port picked from that range and released could be taken by an
//     unrelated test's dial before its server listened, or while a killed
//     node was down before its restart (a CI run failed so: "bind: address
//     already in use"). Below the range only an explicit bind takes a
//     port; the start is random so that concurrent test processes seldom
//     probe the same ports. Otherwise the kernel picks (port 0), as
//     before.
//     Code: FreePorts, ephemeralLow, pickable.
//     Tests: TestFreePortsAvoidTheEphemeralRange, TestPickable.
package loopback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// The ports FreePorts probes below the ephemeral range: from minPort up,
// if the range starts at least minSpan above it.
const (
	minPort = 10000
	minSpan = 1000
)

// FreePorts returns n distinct ports on 127.0.0.1 that were free.
func FreePorts(n int) ([]int, error) {
	var out []int
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	hi, below := pickable(ephemeralLow())
	span := hi - minPort
	next := 0
	if below {
		next = rand.IntN(span)
	}
	for tries := 0; len(out) < n; tries++ {
		addr := "127.0.0.1:0"
		if below {
			if tries >= span {
				return nil, fmt.Errorf("loopback: pick port %d of %d: every port in [%d, %d) is taken", len(out)+1, n, minPort, hi)
			}
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(minPort+next))
			next = (next + 1) % span
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if below {
				continue // taken: the next one
			}
			return nil, fmt.Errorf("loopback: pick port %d of %d: %w", len(out)+1, n, err)
		}
		held = append(held, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range, or 0
// when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	low, err := parseLow(string(b))
	if err != nil {
		return 0
	}
	return low
}

// parseLow reads the first number of ip_local_port_range ("32768\t60999").
func parseLow(s string) (int, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, errors.New("loopback: ip_local_port_range: want two ports")
	}
	return strconv.Atoi(f[0])
}

// pickable is the end of the ports FreePorts probes, [minPort, hi), and
// whether there are enough of them below an ephemeral range that starts
// at low.
func pickable(low int) (hi int, ok bool) {
	if low-minPort < minSpan {
		return 0, false
	}
	return low, true
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
