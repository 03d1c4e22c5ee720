package demo

import (
	"fmt"
	"io"
	"path/filepath"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/keeppeek/statestore/internal/wiredemo"
)

// demoWire plays the specification's sequence diagram through the wire
// protocol's dispatcher (a separate store under dir/wire, on a fake clock so
// the lease lapses at once) and prints each message in text form as it
// crosses the connection.
func demoWire(dir string, out io.Writer) error {
	fmt.Fprintf(out, "\nthe specification's sequence diagram over the wire protocol (store in %s, fake clock):\n",
		filepath.Join(dir, "wire"))
	text := prototext.MarshalOptions{}
	return wiredemo.Run(filepath.Join(dir, "wire"), func(s wiredemo.Step) {
		arrow := "K->C"
		if s.FromClient {
			arrow = "C->K"
		}
		fmt.Fprintf(out, "  %s %s\n", arrow, text.Format(s.Message))
	})
}
