package main

import (
	"context"
	"errors"
	"fmt"
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
	// setup: the table, protected, and its row (written with a plain token)
	for _, q := range []string{
		"CREATE TABLE orders (id int PRIMARY KEY, status text, last_fencing_token bigint NOT NULL DEFAULT 0)",
		"SELECT fencing.protect('orders')",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := fencing.Exec(ctx, conn, fencing.Token(1), "INSERT INTO orders VALUES (101, 'new')"); err != nil {
		log.Fatal(err)
	}
	// end of setup

	// The lease on order:101: waits until granted, released when the function returns.
	if err := fencing.Do(ctx, "", "order:101", 10*time.Second, func(ctx context.Context, lease *fencing.Lease) error {
		if _, err := fencing.Exec(ctx, conn, lease, "UPDATE orders SET status = 'paid' WHERE id = 101"); err != nil {
			return err // *fencing.StaleTokenError, fencing.ErrLeaseLost (ctx is cancelled at a loss)
		}
		fmt.Println("paid with token", lease.Token())
		// An older holder's token: refused by the storage.
		_, err := fencing.Exec(ctx, conn, fencing.Token(lease.Token()-1), "UPDATE orders SET status = 'late' WHERE id = 101")
		var stale *fencing.StaleTokenError
		if errors.As(err, &stale) {
			fmt.Println("refused:", stale.Table, stale.Key, stale.Presented, "<", stale.Stored)
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
}
