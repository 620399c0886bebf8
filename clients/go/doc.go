// Package fencing is the Go client of the fencing PostgreSQL extension:
// leases from fencing.acquire() kept alive on a connection of their own
// (Lease, Session), writes fenced with their token (Fenced), and the
// storage's refusals as Go errors (*StaleTokenError, *MissingTokenError).
//
//	lease, err := fencing.Acquire(ctx, "", "order:101", "worker-a", 10*time.Second)
//	if err != nil { ... }                     // ErrLeaseTimeout: someone else has it
//	defer lease.Release()
//	err = fencing.Fenced(ctx, conn, lease, func(tx pgx.Tx) error {
//		_, err := tx.Exec(ctx, "UPDATE orders SET status = 'paid' WHERE id = 101")
//		return err
//	})                                        // *StaleTokenError: a newer holder wrote
//
// The lease's deadline is counted on the monotonic clock from the start of
// the last call the server acknowledged; past it the lease is lost
// (lease.Context() is cancelled, lease.Check() and Fenced return
// ErrLeaseLost), even if the process was stopped meanwhile.
package fencing
