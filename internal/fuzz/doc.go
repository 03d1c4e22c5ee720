// Package fuzz holds native Go fuzz targets (go test -fuzz) that cut across
// the store's packages: the journal directory as a whole (FuzzJournalOpen),
// one journal frame (FuzzRecordDecode), a checkpoint image
// (FuzzCheckpointLoad), a media-intent document (FuzzDocumentValidate), and
// the public API as a whole against a model of the specification
// (FuzzStoreModel: bytes decode into puts, compare-and-sets, deletes, gets,
// watches, acks, clock advances, checkpoints, backups, restores and
// restarts, and the store must give the model's results, revisions, error
// codes and watch messages).
//
// Every target but FuzzStoreModel (seeded with hand-written programs, one
// per part of the model) is seeded from files the code itself produced: a
// store is run on a fake clock with small journal segments, and its journal
// segments, records and checkpoint become the seeds. All seeds are built at
// f.Add time and checked in under testdata/fuzz/<Target>/, so the fuzzer
// starts from them and plain `go test` replays them. Regenerate the checked-in seeds with
//
//	go test -run TestSeedCorpus ./fuzz/ -update-corpus
//
// and run every target for a short while with ./fuzz/run.sh (FUZZTIME
// overrides the default of 20s per target).
//
// The package has no code of its own; everything lives in _test.go files.
package fuzz
