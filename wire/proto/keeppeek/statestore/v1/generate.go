// Package statestorev1 holds the generated Go types of the KeepPeek state
// store's wire protocol (state_store.proto, package keeppeek.statestore.v1).
// It is pure data: no code here besides what protoc-gen-go writes.
//
// Regenerate with `go generate ./wire/proto/...` from the module root; it needs
// protoc (Debian: protobuf-compiler) on PATH and runs the protoc-gen-go
// version pinned by the module's tool directive.
package statestorev1

//go:generate sh -c "protoc --plugin=protoc-gen-go=\"$(go tool -n protoc-gen-go)\" --proto_path=. --go_out=. --go_opt=paths=source_relative state_store.proto"
