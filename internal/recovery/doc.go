// Package recovery rebuilds a store's state from its files and checks
// stored data the way admission checked the writes that produced it: the
// newest checkpoint image that loads, then every journal record after it,
// each held to the identifier rules (package rules), the bounds (package
// quota), revision continuity and registered schemas. Open runs Load on
// the files it has locked; the tools (kpjournal verify, replay, stat,
// repair) and the torture engine run LoadState and the Checker on a
// stopped store's files without taking its lock or changing a file. It is
// internal because only the store and those tools rebuild state; an
// embedder opens the store.
package recovery
