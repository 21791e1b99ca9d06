package daemon

// The storage backends of paystate's build: each registers itself with
// package store under its name in storage.backend, and store.Open
// chooses among them. A third backend is one more line here (and its
// case in config's validation).
import (
	_ "github.com/paystate/paystate/store/bolt"     // "bolt": one file, the default
	_ "github.com/paystate/paystate/store/postgres" // "postgres": one database that several instances share
)
