// Package fencing is the Go client of the fencing PostgreSQL extension
// (0.4.0 or later): leases from fencing.acquire() kept alive on a
// connection of their own (Lease, Session, Do), leader election
// (Election), writes fenced with their token (Fenced, Exec), and the
// storage's refusals as Go errors (*StaleTokenError, *MissingTokenError,
// both ErrRefusedWrite).
//
//	err := fencing.Do(ctx, "", "order:101", 10*time.Second, func(ctx context.Context, lease *fencing.Lease) error {
//		_, err := fencing.Exec(ctx, conn, lease, "UPDATE orders SET status = 'paid' WHERE id = 101")
//		return err // *StaleTokenError: a newer holder wrote
//	})                // waits until granted (ctx bounds it); ErrLeaseLost if lost meanwhile
//
// The lease's deadline is counted on the monotonic clock from the start of
// the last call the server acknowledged; past it the lease is lost
// (lease.Context() is cancelled, lease.Check() and Fenced return
// ErrLeaseLost), even if the process was stopped meanwhile.
package fencing
