package fencing_test

import (
	"context"
	"errors"
	"log"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go"
	"github.com/jackc/pgx/v5"
)

// A worker: the lease on order:101, one fenced write, released on the way out.
func ExampleAcquire() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	lease, err := fencing.Acquire(ctx, "", "order:101", "worker-a", 10*time.Second,
		fencing.WithWait(30*time.Second)) // first come, first served
	if errors.Is(err, fencing.ErrLeaseTimeout) {
		return // another worker kept it for 30 s
	} else if err != nil {
		log.Fatal(err)
	}
	defer lease.Release()
	err = fencing.Fenced(ctx, conn, lease, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE orders SET status = 'paid' WHERE id = 'order:101'")
		return err
	})
	if err != nil {
		log.Print(err)
	}
}

// Many leases of one holder on one keepalive connection.
func ExampleNewSession() {
	ctx := context.Background()
	session, err := fencing.NewSession(ctx, "", "worker-a", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close() // releases what it still holds
	for _, resource := range []string{"order:101", "order:102"} {
		lease, err := session.Acquire(ctx, resource)
		if err != nil {
			log.Print(err) // fencing.ErrLeaseTimeout: someone else has it
			continue
		}
		go func() {
			<-lease.Context().Done() // lost or released
			log.Print(context.Cause(lease.Context()))
		}()
	}
}

// A token from another lock manager (Redis, etcd), and the dead-letter hook.
func ExampleFenced() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	var redisToken int64 = 2262392068387621
	err = fencing.Fenced(ctx, conn, fencing.Token(redisToken), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE orders SET status = 'paid' WHERE id = 'order:101'")
		return err
	}, fencing.OnStale(func(e *fencing.StaleTokenError) {
		log.Printf("parked: %s %s is at token %d, ours is %d", e.Table, e.Key, e.Stored, e.Presented)
	}))
	var stale *fencing.StaleTokenError
	if errors.As(err, &stale) {
		return // a newer holder wrote: stop
	}
}
