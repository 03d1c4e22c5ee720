package nemesis

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/keeppeek/statestore/internal/clusterkill"
)

// NodeEnv is the environment variable that makes a process a node of the
// nemesis cluster: it holds the node's clusterkill.NodeConfig as JSON.
// Config.Command's process checks it first thing and runs NodeMain.
const NodeEnv = "KP_NEMESIS_NODE"

// NodeMain runs one node process: clusterkill.RunNode with the JSON
// config, its Control commands read from in one per line, until in ends
// (the parent closed it, or died), when the node closes its store.
func NodeMain(config string, in io.Reader, out io.Writer) error {
	var cfg clusterkill.NodeConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return fmt.Errorf("nemesis node: %s: %w", NodeEnv, err)
	}
	ctl := make(chan string)
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			ctl <- sc.Text()
		}
	}()
	cfg.Control = ctl
	return clusterkill.RunNode(cfg, out, stop)
}
