package fencing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// maxHolder is the longest holder the clients use: "fencing keepalive " +
// holder fits application_name's 63 bytes.
const maxHolder = 45

// DefaultHolder returns a new holder name "<host>:<pid>:<random>": the
// machine's hostname (cut so that the whole is at most 45 bytes), this
// process's id and 8 lowercase hex characters from crypto/rand. Every
// Acquire, NewSession and NewElection without WithHolder takes a new one, so
// two goroutines of one process are two holders. Choose a holder yourself
// (WithHolder) only when a restarted process must resume its own lease.
func DefaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("fencing: crypto/rand: %v", err)) // never on Linux
	}
	tail := ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b[:])
	if room := maxHolder - len(tail); len(host) > room {
		host = strings.ToValidUTF8(host[:room], "")
	}
	return host + tail
}

// minServer is the oldest fencing extension this client speaks to.
var minServer = [3]int{0, 4, 0}

// checkServer reads the fencing extension's version on a new connection:
// ErrUnsupportedServer if it is absent or older than 0.4.0.
func checkServer(ctx context.Context, conn *pgx.Conn) error {
	var version string
	err := conn.QueryRow(ctx, "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'fencing'").Scan(&version)
	if err == pgx.ErrNoRows {
		return fmt.Errorf("%w: the database %q has no fencing extension: CREATE EXTENSION fencing (0.4.0 or later)", ErrUnsupportedServer, conn.Config().Database)
	}
	if err != nil {
		return err
	}
	if !versionAtLeast(version, minServer) {
		return fmt.Errorf("%w: fencing %s is older than 0.4.0, which this client needs: ALTER EXTENSION fencing UPDATE", ErrUnsupportedServer, version)
	}
	return nil
}

// versionAtLeast compares "major.minor.patch" (a missing part is 0; a
// suffix such as "dev" after the digits of a part is ignored; a part that
// does not start with a digit makes the version unknown: false).
func versionAtLeast(version string, least [3]int) bool {
	parts := strings.SplitN(version, ".", 3)
	for i := 0; i < 3; i++ {
		n := 0
		if i < len(parts) {
			digits := parts[i]
			end := 0
			for end < len(digits) && digits[end] >= '0' && digits[end] <= '9' {
				end++
			}
			if end == 0 {
				return false
			}
			n, _ = strconv.Atoi(digits[:end])
		}
		if n != least[i] {
			return n > least[i]
		}
	}
	return true
}
