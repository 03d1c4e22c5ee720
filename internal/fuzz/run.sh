#!/bin/sh
# Runs every fuzz target of this package for a fixed short time, one after
# the other, for CI. FUZZTIME overrides the time per target (default 20s;
# any -fuzztime value, e.g. 10m or 50000x; FUZZMINIMIZETIME likewise,
# default 0s). Extra arguments go to go test
# (e.g. -parallel=1). A finding fails the run and leaves its input under
# fuzz/testdata/fuzz/<Target>/.
set -eu
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-20s}"
# Minimizing every new corpus entry stalls a worker for up to a minute on
# the journal target's ~9 KB inputs; crashers are reproducible as found.
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-0s}"
# Replay the seed corpus (and any saved crasher) first, as a plain test.
go test -count=1 ./fuzz/
for target in FuzzJournalOpen FuzzRecordDecode FuzzCheckpointLoad FuzzDocumentValidate FuzzStoreModel; do
	echo "== $target ($FUZZTIME)"
	go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime="$FUZZMINIMIZETIME" -timeout=0 "$@" ./fuzz/
done
