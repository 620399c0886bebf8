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
	for _, q := range []string{
		"CREATE TABLE orders (id int PRIMARY KEY, status text, last_fencing_token bigint NOT NULL DEFAULT 0)",
		"SELECT fencing.protect('orders')",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			log.Fatal(err)
		}
	}
	write := func(fence fencing.Fence, sql string) error {
		return fencing.Fenced(ctx, conn, fence, func(tx pgx.Tx) error { // SET LOCAL fencing.token; COMMIT
			_, err := tx.Exec(ctx, sql)
			return err
		})
	}
	if err := write(fencing.Token(1), "INSERT INTO orders VALUES (101, 'new')"); err != nil { // a plain token
		log.Fatal(err)
	}

	lease, err := fencing.Acquire(ctx, "", "order:101", "worker-A", 10*time.Second, fencing.WithWait(30*time.Second))
	if err != nil {
		log.Fatal(err) // fencing.ErrLeaseTimeout: not granted within 30 s
	}
	defer lease.Release()
	if err := write(lease, "UPDATE orders SET status = 'paid' WHERE id = 101"); err != nil {
		log.Print(err) // *fencing.StaleTokenError, fencing.ErrLeaseLost, ...
		return         // (log.Fatal would skip the deferred Release)
	}
	fmt.Println("paid with token", lease.Token())

	err = write(fencing.Token(lease.Token()-1), "UPDATE orders SET status = 'late' WHERE id = 101") // an older holder's token
	var stale *fencing.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Println("refused:", stale.Table, stale.Key, stale.Presented, "<", stale.Stored)
	}
}
