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
	lease, err := fencing.Acquire(ctx, "", "order:101", 10*time.Second,
		fencing.WithWait(30*time.Second)) // first come, first served; holder: fencing.DefaultHolder()
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
	session, err := fencing.NewSession(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close() // releases what it still holds
	for _, resource := range []string{"order:101", "order:102"} {
		lease, err := session.Acquire(ctx, resource, 10*time.Second, fencing.WithWait(0))
		if err != nil {
			log.Print(err) // fencing.ErrLeaseBusy: someone else has it
			continue
		}
		go func() {
			<-lease.Context().Done() // lost or released
			log.Print(context.Cause(lease.Context()))
		}()
	}
}

// The lease around a function: ctx is cancelled if the lease is lost, and
// the lease is released when the function returns.
func ExampleDo() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	err = fencing.Do(ctx, "", "order:101", 10*time.Second, func(ctx context.Context, lease *fencing.Lease) error {
		_, err := fencing.Exec(ctx, conn, lease, "UPDATE orders SET status = 'paid' WHERE id = $1", "order:101")
		return err
	})
	if err != nil {
		log.Print(err) // fencing.ErrLeaseLost, *fencing.StaleTokenError, ...
	}
}

// Leader election: one leader among the candidates, its token fencing its
// writes, and every candidate told of each new leader.
func ExampleNewElection() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	conn, err := pgx.Connect(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	election, err := fencing.NewElection("", "billing-leader", 10*time.Second, fencing.Recampaign(),
		fencing.OnNewLeader(func(holder string, token int64) { log.Printf("leader %q (token %d)", holder, token) }))
	if err != nil {
		log.Fatal(err)
	}
	defer election.Close() // resigns
	go func() {
		for range election.Observe(ctx) {
		}
	}()
	if err := election.Campaign(ctx); err != nil { // waits in order
		log.Fatal(err)
	}
	for election.IsLeader() {
		if _, err := fencing.Exec(ctx, conn, election, "UPDATE invoices SET sent = true WHERE id = $1", 7); err != nil {
			log.Print(err) // fencing.ErrLeaseLost once the leadership is lost
		}
		select {
		case <-election.Done():
		case <-time.After(time.Second):
		}
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
