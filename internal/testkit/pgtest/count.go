package pgtest

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Counter is a pgx tracer (postgres.Options.Tracer) that counts, while
// On, the statements a pool sends but BEGIN, COMMIT and ROLLBACK (as
// pg_stat_statements counts them without utility statements), each
// statement of a pgx.Batch included, and the round trips: each statement
// sent alone (BEGIN and COMMIT too), and each batch.
type Counter struct {
	On                     atomic.Bool
	Statements, RoundTrips atomic.Int64
}

// TraceQueryStart counts a statement sent alone.
func (c *Counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if c.On.Load() {
		c.RoundTrips.Add(1)
		c.count(d.SQL)
	}
	return ctx
}

// TraceQueryEnd does nothing.
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts a batch's round trip.
func (c *Counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if c.On.Load() {
		c.RoundTrips.Add(1)
	}
	return ctx
}

// TraceBatchQuery counts a statement of a batch.
func (c *Counter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if c.On.Load() {
		c.count(d.SQL)
	}
}

// TraceBatchEnd does nothing.
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// count counts sql, unless it is BEGIN, COMMIT or ROLLBACK.
func (c *Counter) count(sql string) {
	switch strings.ToLower(strings.Fields(sql + " x")[0]) {
	case "begin", "commit", "rollback":
	default:
		c.Statements.Add(1)
	}
}
