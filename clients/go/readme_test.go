package fencing

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The seed worker (examples/seed/main.go) is what README.md and docs/clients.md's
// Go section show first, verbatim; TestReadmeInstallSteps runs it the way
// the README tells a new user to.
const seedFile = "examples/seed/main.go"

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

func firstGoBlock(t *testing.T, doc string) string {
	t.Helper()
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if doc == "../../docs/clients.md" { // the Go section only
		s := string(text)
		start := strings.Index(s, "\n## Go\n")
		end := strings.Index(s[start+1:], "\n## ")
		if start < 0 || end < 0 {
			t.Fatal("docs/clients.md has no section ## Go")
		}
		text = []byte(s[start : start+1+end])
	}
	block := goBlock.FindSubmatch(text)
	if block == nil {
		t.Fatalf("%s has no go block", doc)
	}
	return string(block[1])
}

func TestDocsShowTheSeedWorker(t *testing.T) {
	seed, err := os.ReadFile(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"README.md", "../../docs/clients.md"} {
		if firstGoBlock(t, doc) != string(seed) {
			t.Errorf("%s's first go block (of its Go section) is not %s", doc, seedFile)
		}
	}
}

// logicLines counts a Go program's lines of the user's logic: not blank
// lines, comments, the package clause, the import block, nor the lines
// from a comment "// setup" to "// end of setup" (the table's setup).
func logicLines(src string) int {
	n, inImport, inSetup := 0, false, false
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "// setup"):
			inSetup = true
		case line == "// end of setup":
			inSetup = false
		case inSetup, line == "", strings.HasPrefix(line, "//"), strings.HasPrefix(line, "package "):
		case line == "import (":
			inImport = true
		case inImport:
			inImport = line != ")"
		case strings.HasPrefix(line, "import "):
		default:
			n++
		}
	}
	return n
}

func TestSeedWorkerIsShort(t *testing.T) {
	seed, err := os.ReadFile(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := logicLines(string(seed)); n > 25 || n < 10 {
		t.Errorf("the seed worker has %d lines of logic, want at most 25 (and the counter sees at least 10)", n)
	}
	// The counter itself.
	if n := logicLines("package main\n\nimport (\n\t\"fmt\"\n)\n\n// c\nfunc main() {\n\t// setup\n\tx()\n\t// end of setup\n\tfmt.Println()\n}\n"); n != 3 {
		t.Errorf("logicLines counted %d, want 3", n)
	}
}

// README.md's install steps (the ```sh block after "<!-- install steps -->"),
// run as written in a scratch folder with FENCING naming this repository:
// go mod init, the replace directive, go mod tidy, then `go run .` of the
// seed worker in a new database.
func TestReadmeInstallSteps(t *testing.T) {
	conn := connect(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- install steps -->\n+```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no install steps block")
	}
	var steps []string
	for _, line := range strings.Split(string(m[1]), "\n") {
		if !strings.HasPrefix(line, "FENCING=") { // the reader's clone: ours here
			steps = append(steps, line)
		}
	}
	ctx := context.Background()
	db := fmt.Sprintf("fencing_go_seed_%d", os.Getpid())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DROP DATABASE "+db+" WITH (FORCE)")
	config := conn.Config().Copy()
	config.Database = db
	other, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Exec(ctx, "CREATE EXTENSION fencing")
	other.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-exc", strings.Join(steps, "\n"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "FENCING="+root, "PGDATABASE="+db, "GOFLAGS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's install steps: %v\n%s", err, out.String())
	}
	if !regexp.MustCompile(`(?m)^paid with token \d+\nrefused: orders \(id\)=\(101\) (\d+) < (\d+)\n`).Match(out.Bytes()) {
		t.Fatalf("the seed worker's output:\n%s", out.String())
	}
	var status string
	var token int64
	check, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close(ctx)
	if err := check.QueryRow(ctx, "SELECT status, last_fencing_token FROM orders WHERE id = 101").Scan(&status, &token); err != nil || status != "paid" || token < 2 {
		t.Errorf("order 101: %q, token %d (%v); want paid with the lease's token", status, token, err)
	}
}
