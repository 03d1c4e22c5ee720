// Command kpworker is a KeepPeek worker (transcoder, viewer or group
// client) as its own process, against a kpstate server and the simulated
// media server's HTTP API. It is the binary workerproc's tests build and
// run; its flags and behaviour are package workerproc's (go doc
// ./internal/workerproc, or kpworker --help).
//
//	go build -o kpworker ./internal/workerproc/cmd/kpworker
//	./kpworker --role transcoder --endpoints ws://127.0.0.1:8765 --token-file t1.token \
//	    --media http://127.0.0.1:9000 --namespace service/transcoder-a --holder transcoder-1
package main

import (
	"os"

	"github.com/keeppeek/statestore/internal/workerproc"
)

func main() { os.Exit(workerproc.Main(os.Args[1:], os.Stdout, os.Stderr)) }
