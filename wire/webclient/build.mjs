// Builds the committed bundle: regenerates the protobuf messages from the
// .proto with protoc-gen-es, type-checks, bundles with esbuild, copies the
// inspector page, and records the SHA-256 of every input and output in
// dist/MANIFEST.sha256. The Go test TestBundleIsCurrent recomputes those
// hashes, so a source changed without a rebuild (or a hand-edited bundle)
// fails `go test` without npm. Run: npm ci && npm run build.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import * as esbuild from "esbuild";

const here = new URL(".", import.meta.url).pathname;
const proto = join(here, "..", "proto");
process.chdir(here);

execFileSync("protoc", [
  "-I", proto,
  "--plugin=protoc-gen-es=node_modules/.bin/protoc-gen-es",
  "--es_out=src/gen",
  "--es_opt=target=ts",
  "keeppeek/statestore/v1/state_store.proto",
], { stdio: "inherit" });
execFileSync("node_modules/.bin/tsc", ["-p", "."], { stdio: "inherit" });

mkdirSync("dist", { recursive: true });
const common = { bundle: true, minify: true, target: "es2022", legalComments: "none", logLevel: "warning" };
await esbuild.build({ ...common, entryPoints: ["src/index.ts"], format: "esm", outfile: "dist/keeppeek.mjs" });
await esbuild.build({ ...common, entryPoints: ["src/inspector.ts"], format: "iife", outfile: "dist/inspector.js" });
copyFileSync("src/inspector.html", "dist/inspector.html");

// The manifest lists inputs first, then outputs, each "sha256  path" with
// paths relative to the repository root, sorted within each group.
function walk(dir) {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}
const root = join(here, "..");
const rel = (p) => relative(root, join(here, p));
const inputs = [
  join(proto, "keeppeek/statestore/v1/state_store.proto"),
  ...["build.mjs", "package.json", "package-lock.json", "tsconfig.json"].map((p) => join(here, p)),
  ...walk(join(here, "src")),
].map((p) => relative(root, p)).sort();
const outputs = ["dist/inspector.html", "dist/inspector.js", "dist/keeppeek.mjs"].map(rel).sort();
const line = (p) => createHash("sha256").update(readFileSync(join(root, p))).digest("hex") + "  " + p;
writeFileSync("dist/MANIFEST.sha256",
  "# inputs\n" + inputs.map(line).join("\n") + "\n# outputs\n" + outputs.map(line).join("\n") + "\n");
