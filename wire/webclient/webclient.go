// Package webclient holds the state store's browser client and inspector
// page, built from the TypeScript under src/ and embedded so that Go users
// need no npm: Assets serves dist/keeppeek.mjs (the client library, an ES
// module), dist/inspector.html and dist/inspector.js (the inspector page).
//
// # Invariants
//
//  1. dist/ is the build of the sources as they stand. `npm ci && npm run
//     build` (build.mjs) regenerates the protobuf messages from proto/ with
//     protoc-gen-es, type-checks, bundles with esbuild and writes
//     dist/MANIFEST.sha256, the SHA-256 of every input (the .proto, src/,
//     the package and lock files, the build script) and every output. The
//     test recomputes them, so a source edited without a rebuild, a new
//     source file, or a hand-edited bundle fails `go test` on any machine,
//     npm or not; and what Assets serves is exactly those outputs.
//     Code: dist, Assets.
//     Tests: TestBundleIsCurrent, TestAssetsServeTheBuiltFiles.
package webclient

import (
	"embed"
	"io/fs"
)

//go:embed dist/inspector.html dist/inspector.js dist/keeppeek.mjs
var dist embed.FS

// Assets returns the built files, at the root of the returned FS:
// keeppeek.mjs, inspector.html, inspector.js.
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path and embedded: cannot happen
	}
	return sub
}
