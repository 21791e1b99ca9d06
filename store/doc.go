// Package store is paystate's storage contract: what a backend is and how
// one is chosen. The record families and their transaction are declared
// in package pay (Store, Tx); a backend implements them and
// registers itself here under its name in storage.backend (Register, in
// the backend package's init, as database/sql's drivers do), and Open
// chooses the backend a configuration names. paystate's build links two,
// named in one file (daemon/backends.go):
//
//	store/bolt       "bolt": one bbolt file, the embedded default
//	store/postgres   "postgres": one PostgreSQL database that several instances share
//	store/storetest  the conformance suite both pass unchanged
//
// The backends are siblings: neither imports the other, and only
// store/bolt imports bbolt, only store/postgres pgx.
//
// A consumer declares the families it uses as an interface of its own,
// composed of these, next to its use (finalize, ripple, the sweeper,
// verify), and receives only those.
//
// # Capabilities
//
// Open returns a Backend: the store and what its backend can do besides,
// declared rather than found by type assertion or by comparing backend
// names (river's riverdriver). A nil capability is one the backend does
// not have:
//
//	Shared, CheapEmptyCommit   several instances may share it; a write that wrote nothing costs no flush
//	EndLeases                  end a dead process's leases at start (a store one process alone uses)
//	Backup                     a consistent copy to a local file (GET /admin/backup, paystate backup)
//	Check, CheckLedger         the database's own pages, indexes and journal (paystate verify)
//	Export, Import             the source and the target of paystate copy (ExportSink)
//	Migration                  what Open did to the schema (paystate migrate)
//
// What is known of a backend without opening it is its Driver (Lookup):
// whether it is one file (File), has no online backup (NoBackup) or takes
// a copy (CopyInto), so that a command refuses before it opens anything.
package store
