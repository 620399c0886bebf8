package main

import (
	"context"
	"errors"
	"log"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go"
	"github.com/jackc/pgx/v5"
)

func main() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "") // PGHOST, PGPORT, PGUSER, PGDATABASE
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)

	lease, err := fencing.Acquire(ctx, "", "order:101", "worker-a", 10*time.Second)
	if err != nil {
		log.Fatal(err) // fencing.ErrLeaseTimeout: another worker holds order:101
	}
	defer lease.Release() // also on a panic

	err = fencing.Fenced(ctx, conn, lease, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE orders SET status = 'paid' WHERE id = 'order:101'")
		return err
	})
	var stale *fencing.StaleTokenError
	switch {
	case errors.As(err, &stale):
		log.Printf("fenced out: stored token %d is newer than ours", stale.Stored)
	case err != nil:
		log.Print(err) // fencing.ErrLeaseLost: lost before the write, nothing sent
	default:
		log.Printf("order:101 paid with token %d", lease.Token())
	}
}
