package fencing

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATEs of the storage guard's refusals (class 23, integrity constraint
// violation).
const (
	SQLStateStaleToken   = "23T01"
	SQLStateMissingToken = "23T02"
)

var (
	// ErrLeaseLost: the lease's deadline passed, a renewal was refused, or
	// the lease was released. Writes must stop.
	ErrLeaseLost = errors.New("fencing: lease lost")
	// ErrLeaseTimeout: a wait (WithWait, or the context's deadline) passed
	// and the lease was not granted.
	ErrLeaseTimeout = errors.New("fencing: lease not granted")
	// ErrLeaseBusy: a try (WithWait(0)) found the lease held by another
	// holder. It is not ErrLeaseTimeout: nothing waited.
	ErrLeaseBusy = errors.New("fencing: lease busy")
	// ErrRefusedWrite: the storage refused a write for its token;
	// errors.Is(err, ErrRefusedWrite) holds for *StaleTokenError (23T01) and
	// *MissingTokenError (23T02) alike.
	ErrRefusedWrite = errors.New("fencing: write refused")
	// ErrUnsupportedServer: the database has no fencing extension, or one
	// older than 0.4.0, the oldest this client speaks to (the error says
	// ALTER EXTENSION fencing UPDATE).
	ErrUnsupportedServer = errors.New("fencing: unsupported server")
	// ErrLeaseAlreadyHeld: the holder asked again for a lease it holds
	// (the error is a *LeaseAlreadyHeldError).
	ErrLeaseAlreadyHeld = errors.New("fencing: lease already held by this holder")
)

// LeaseAlreadyHeldError: the holder asked again for a lease it holds;
// Token is the one it holds (0 if unknown). errors.Is(err,
// ErrLeaseAlreadyHeld) holds.
type LeaseAlreadyHeldError struct {
	Resource string
	Holder   string
	Token    int64
}

func (e *LeaseAlreadyHeldError) Error() string {
	return fmt.Sprintf("fencing: holder %q already holds the lease on %q with token %d", e.Holder, e.Resource, e.Token)
}

// Is makes errors.Is(err, ErrLeaseAlreadyHeld) true.
func (e *LeaseAlreadyHeldError) Is(target error) bool { return target == ErrLeaseAlreadyHeld }

// StaleTokenError is a write refused with 23T01: a newer lock holder has
// written. Unwrap gives the driver's error (*pgconn.PgError).
type StaleTokenError struct {
	Schema     string // schema of the table written ("" for fencing.fence())
	Table      string // the table written, unqualified ("" for fencing.fence())
	Column     string // the table's token column
	Constraint string // "fencing_stale_token"
	Key        string // the row's key as DETAIL shows it, "(id)=(1)"; "" if not visible
	Resource   string // the resource, for fencing.fence()
	Mode       string // "monotonic" or "strict"
	Presented  int64  // the token the write presented
	Stored     int64  // the token stored; 0 if not visible
	err        error
}

func (e *StaleTokenError) Error() string { return "fencing: " + e.err.Error() }
func (e *StaleTokenError) Unwrap() error { return e.err }

// Is makes errors.Is(err, ErrRefusedWrite) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrRefusedWrite }

// MissingTokenError is a write refused with 23T02: it presented no token.
// Unwrap gives the driver's error (*pgconn.PgError).
type MissingTokenError struct {
	Schema     string
	Table      string
	Column     string
	Constraint string // "fencing_missing_token"
	Key        string // "" if not visible
	Stored     int64  // the token stored; 0 if not visible
	err        error
}

func (e *MissingTokenError) Error() string { return "fencing: " + e.err.Error() }
func (e *MissingTokenError) Unwrap() error { return e.err }

// Is makes errors.Is(err, ErrRefusedWrite) true.
func (e *MissingTokenError) Is(target error) bool { return target == ErrRefusedWrite }

// DETAIL of src/errors.cpp, e.g. "Relation public.t, key (id)=(1): presented
// token 5, stored token 7 (monotonic mode)." or "Resource "r": ...".
var (
	relationName = `(?:"(?:[^"]|"")*"|[^\s,."]+)(?:\.(?:"(?:[^"]|"")*"|[^\s,."]+))?`
	staleDetail  = regexp.MustCompile(
		`^(?:Relation ` + relationName + `, (?:key (.*)|all rows)|Resource "(.*)"): presented token (\d+), stored token (\d+|\(not visible\)) \((\w+) mode\)\.$`)
	missingDetail = regexp.MustCompile(
		`^Relation ` + relationName + `, (?:key (.*?)|all rows): no token presented, stored token (\d+|\(not visible\))\.`)
)

// MapError turns a 23T01 or 23T02 anywhere in err's chain into
// *StaleTokenError or *MissingTokenError (wrapping err); other errors, and
// errors already mapped, are returned as they are. Fenced maps for you; use
// MapError for writes made without it.
func MapError(err error) error {
	if err == nil {
		return nil
	}
	var stale *StaleTokenError
	var missing *MissingTokenError
	if errors.As(err, &stale) || errors.As(err, &missing) {
		return err
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case SQLStateStaleToken:
		e := &StaleTokenError{Schema: pgErr.SchemaName, Table: pgErr.TableName,
			Column: pgErr.ColumnName, Constraint: pgErr.ConstraintName, err: err}
		if m := staleDetail.FindStringSubmatch(pgErr.Detail); m != nil {
			e.Key = visible(m[1])
			e.Resource = m[2]
			e.Presented, _ = strconv.ParseInt(m[3], 10, 64)
			e.Stored = tokenText(m[4])
			e.Mode = m[5]
		}
		return e
	case SQLStateMissingToken:
		e := &MissingTokenError{Schema: pgErr.SchemaName, Table: pgErr.TableName,
			Column: pgErr.ColumnName, Constraint: pgErr.ConstraintName, err: err}
		if m := missingDetail.FindStringSubmatch(pgErr.Detail); m != nil {
			e.Key = visible(m[1])
			e.Stored = tokenText(m[2])
		}
		return e
	}
	return err
}

// visible maps DETAIL's "(not visible)" (the role may not read the key) to "".
func visible(s string) string {
	if s == "(not visible)" {
		return ""
	}
	return s
}

func tokenText(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// lostError says why a lease ended; errors.Is(err, ErrLeaseLost) holds.
func lostError(resource string, token int64, why string) error {
	return fmt.Errorf("%w: %s (token %d): %s", ErrLeaseLost, resource, token, why)
}
