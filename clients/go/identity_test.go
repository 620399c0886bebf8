package fencing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

var holderForm = regexp.MustCompile(`^(.+):(\d+):([0-9a-f]{8})$`)

func TestDefaultHolder(t *testing.T) {
	host, _ := os.Hostname()
	a, b := DefaultHolder(), DefaultHolder()
	for _, h := range []string{a, b} {
		m := holderForm.FindStringSubmatch(h)
		if m == nil || len(h) > 45 {
			t.Fatalf("holder %q: want <host>:<pid>:<8 hex>, at most 45 bytes", h)
		}
		if !strings.HasPrefix(host, m[1]) || m[2] != strconv.Itoa(os.Getpid()) {
			t.Errorf("holder %q: host %q not a prefix of %q, or pid %s not %d", h, m[1], host, m[2], os.Getpid())
		}
	}
	if a == b {
		t.Errorf("two default holders are the same: %q", a)
	}
}

func TestVersionAtLeast(t *testing.T) {
	for v, want := range map[string]bool{
		"0.4.0": true, "0.4.1": true, "0.10.0": true, "1.0": true, "0.4": true, "0.4.0dev": true,
		"0.3.0": false, "0.3.9": false, "0.1.0": false, "": false, "abc": false, "0.x.0": false,
	} {
		if got := versionAtLeast(v, minServer); got != want {
			t.Errorf("versionAtLeast(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestMajorVersion(t *testing.T) {
	for v, want := range map[string]int{"17.2": 17, "18beta1": 18, "15.20 (Debian 15.20-0+deb12u1)": 15, "9.6.24": 9, "": 0, "devel": 0} {
		if got := majorVersion(v); got != want {
			t.Errorf("majorVersion(%q) = %d, want %d", v, got, want)
		}
	}
}

func TestBadInputsRefusedBeforeConnecting(t *testing.T) {
	ctx := context.Background()
	// port 1: nothing listens; each call must fail on its input first.
	const nowhere = "host=127.0.0.1 port=1 connect_timeout=1"
	if _, err := Acquire(ctx, nowhere, "r", 0); err == nil || !strings.Contains(err.Error(), "ttl must be positive") {
		t.Errorf("ttl 0: %v", err)
	}
	if _, err := Acquire(ctx, nowhere, "r", time.Second, WithWait(-time.Second)); err == nil || !strings.Contains(err.Error(), "wait must not be negative") {
		t.Errorf("negative wait: %v", err)
	}
	if err := Do(ctx, nowhere, "r", time.Second, nil); err == nil || !strings.Contains(err.Error(), "needs a function") {
		t.Errorf("Do without a function: %v", err)
	}
	if _, err := Acquire(ctx, "host=127.0.0.1 port=notaport", "r", time.Second); err == nil {
		t.Error("a bad connection string was accepted")
	}
	if _, err := NewElection(nowhere, "", time.Second); err == nil {
		t.Error("an election without a name was accepted")
	}
	if _, err := NewElection(nowhere, "e", 0); err == nil || !strings.Contains(err.Error(), "ttl must be positive") {
		t.Errorf("election ttl 0: %v", err)
	}
	if _, err := NewElection("port=notaport", "e", time.Second); err == nil {
		t.Error("an election's bad connection string was accepted")
	}
	s := &Session{keeper: &keeper{quit: make(chan struct{})}}
	if _, err := s.Acquire(ctx, "r", time.Second, WithWait(-1)); err == nil {
		t.Error("a session's negative wait was accepted")
	}
}

func TestOptionsDefaults(t *testing.T) {
	o, err := collect(nil)
	if err != nil || o.wait != Forever || !holderForm.MatchString(o.holder) || o.logger == nil {
		t.Errorf("defaults: %+v %v", o, err)
	}
	o, err = collect([]AcquireOption{WithHolder("h"), WithWait(0), WithLogger(nil)})
	if err != nil || o.wait != 0 || o.holder != "h" || o.logger == nil {
		t.Errorf("options: %+v %v", o, err)
	}
}

func TestRetryFloor(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		100 * time.Millisecond: 50 * time.Millisecond,
		time.Second:            100 * time.Millisecond,
		time.Hour:              time.Second,
	} {
		if got := retryInterval(ttl); got != want {
			t.Errorf("retryInterval(%v) = %v, want %v", ttl, got, want)
		}
	}
}

// A loss is logged once, at warning level, in the words of every client.
func TestLossLine(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	k, err := newKeeper("host=127.0.0.1 port=1", "h:1:abcdef01", time.Second, false, logger)
	if err != nil {
		t.Fatal(err)
	}
	l := newLease(k, nil, "order:7", 42, 30*time.Millisecond, time.Now().Add(30*time.Millisecond))
	<-l.Context().Done()
	l.Lost()
	l.lose("again", true) // already lost: no second line
	want := "level=WARN msg=\"fencing: lease on order:7 lost (holder h:1:abcdef01, token 42): the deadline passed\"\n"
	if got := regexp.MustCompile(`^time=\S+ `).ReplaceAllString(buf.String(), ""); got != want {
		t.Errorf("logged %q, want %q", buf.String(), want)
	}
	// A release is no loss: nothing logged.
	buf.Reset()
	l2 := newLease(k, nil, "order:8", 43, time.Minute, time.Now().Add(time.Minute))
	if !l2.markReleased(true) || buf.Len() != 0 {
		t.Errorf("a release logged %q", buf.String())
	}
}

func TestRefusedWriteBase(t *testing.T) {
	stale := MapError(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: SQLStateStaleToken}))
	missing := MapError(&pgconn.PgError{Code: SQLStateMissingToken})
	other := MapError(&pgconn.PgError{Code: "23505"})
	if !errors.Is(stale, ErrRefusedWrite) || !errors.Is(missing, ErrRefusedWrite) {
		t.Errorf("ErrRefusedWrite: stale %v, missing %v", errors.Is(stale, ErrRefusedWrite), errors.Is(missing, ErrRefusedWrite))
	}
	if errors.Is(other, ErrRefusedWrite) || errors.Is(ErrLeaseLost, ErrRefusedWrite) {
		t.Error("ErrRefusedWrite for a unique violation or a lost lease")
	}
	if errors.Is(fmt.Errorf("%w", ErrLeaseBusy), ErrLeaseTimeout) || errors.Is(ErrLeaseTimeout, ErrLeaseBusy) {
		t.Error("ErrLeaseBusy and ErrLeaseTimeout are one")
	}
}
