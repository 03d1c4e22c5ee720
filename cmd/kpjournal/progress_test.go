package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns both ends of a pseudo-terminal, so the progress bar sees
// a terminal without the test needing one.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open slave: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// The bar is drawn on a terminal and nowhere else: a pipe or a file (what
// scripts and tests capture) must receive none of its bytes.
func TestProgressDrawsOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := startProgress(&buf, "verify", 100)
	p.add(50)
	p.add(50)
	p.finish()
	if buf.Len() != 0 {
		t.Fatalf("progress wrote %q to a non-terminal", buf.String())
	}

	master, slave := openPTY(t)
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(master) // ends with EIO once the slave closes
		got <- string(b)
	}()
	if !isTerminal(slave) {
		t.Fatal("the pty slave is not a terminal")
	}
	p = startProgress(slave, "verify", 100)
	p.add(50)
	p.add(50)
	p.finish()
	slave.Close()
	out := <-got
	// Halfway drawn, then cleared when the work is done, so the command's
	// own output starts on a clean line.
	if !strings.Contains(out, "verify") || !strings.Contains(out, " 50%") {
		t.Fatalf("terminal received %q, want the label at 50%%", out)
	}
	if !strings.HasSuffix(out, "\r") {
		t.Fatalf("terminal received %q: the bar is not cleared at the end", out)
	}
}
