package nemesis

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/keeppeek/statestore/internal/clusterkill"
)

// NodeEnv is the environment variable that makes a process a node of the
// nemesis cluster: it holds the node's clusterkill.NodeConfig as JSON.
// Config.Command's process checks it first thing and runs NodeMain.
const NodeEnv = "KP_NEMESIS_NODE"

// NodeMain runs one node process: clusterkill.ServeLines with the JSON
// config and the fault hooks armed, its Control commands read from in one
// per line, until in ends (the parent closed it, or died), when the node
// closes its store.
func NodeMain(config string, in io.Reader, out io.Writer) error {
	var cfg clusterkill.NodeConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return fmt.Errorf("nemesis node: %s: %w", NodeEnv, err)
	}
	cfg.Faults = true
	return clusterkill.ServeLines(cfg, in, out)
}
