// Package pgtest gives every test a real, isolated PostgreSQL database.
//
// The server, found once per test process, is the first of:
//  1. TEST_DATABASE_URL (a role allowed to CREATE DATABASE);
//  2. a throwaway cluster started from local PostgreSQL binaries
//     (internal/pgcluster), fsync off, removed with the process;
//  3. a container from testcontainers-go, when a Docker engine answers;
//  4. otherwise the test fails with a message saying how to get one.
//
// Each NewPool call creates a fresh database from a template that already has
// every migration applied (built once per migration set, shared between
// processes), so test packages run in parallel and never see each other.
//
// Internal: no stability promise.
package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/hookline/hookline/internal/pgcluster"
	"github.com/hookline/hookline/migrations"
)

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
	counter    atomic.Int64
)

// ServerURL returns the admin URL of the test server, starting one if needed.
func ServerURL(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() { serverURL, serverErr = findServer() })
	if serverErr != nil {
		t.Fatalf("pgtest: no PostgreSQL for tests: %v", serverErr)
	}
	return serverURL
}

func findServer() (string, error) {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u, nil
	}
	ctx := context.Background()
	if _, err := pgcluster.FindBinDir(); err == nil {
		sweepStale()
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("hookline-pgtest-%d", os.Getpid()))
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true})
		if err != nil {
			return "", fmt.Errorf("start a throwaway cluster: %w", err)
		}
		return c.URL("postgres"), nil
	}
	if os.Getenv("DOCKER_HOST") != "" || fileExists("/var/run/docker.sock") {
		ctr, err := tcpostgres.Run(ctx, "postgres:16-alpine",
			tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"),
			tcpostgres.BasicWaitStrategies())
		if err == nil {
			return ctr.ConnectionString(ctx, "sslmode=disable")
		}
		return "", fmt.Errorf("no PostgreSQL binaries, and testcontainers failed: %w", err)
	}
	return "", fmt.Errorf("set TEST_DATABASE_URL to a server where this role may CREATE DATABASE, " +
		"or install PostgreSQL binaries (Debian/Ubuntu: apt-get install postgresql; `make test` does it), " +
		"or start a Docker engine for testcontainers")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// sweepStale removes data directories of earlier test processes that died.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "hookline-pgtest-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "hookline-pgtest-"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(d)
		}
	}
}

// WithDatabase returns u with its database name replaced.
func WithDatabase(u, db string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	parsed.Path = "/" + db
	return parsed.String()
}

var templateOnce sync.Once
var templateName string
var templateErr error

func migratedTemplate(t testing.TB) string {
	t.Helper()
	admin := ServerURL(t)
	templateOnce.Do(func() { templateName, templateErr = buildTemplate(admin) })
	if templateErr != nil {
		t.Fatalf("pgtest: migrated template: %v", templateErr)
	}
	return templateName
}

func buildTemplate(admin string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := sha256.New()
	for _, m := range migrations.All() {
		h.Write([]byte(m.Up))
	}
	h.Write([]byte(riverVersionTag))
	name := "hookline_tmpl_" + hex.EncodeToString(h.Sum(nil))[:16]

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	// Serialise template builds between test processes sharing a server.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7411)"); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, "SELECT pg_advisory_unlock(7411)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_building"
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, WithDatabase(admin, building))
	if err != nil {
		return "", err
	}
	err = migrations.Up(ctx, pool, nil)
	pool.Close()
	if err != nil {
		return "", err
	}
	// Renaming at the end means a crashed build never leaves a half-migrated template.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		return "", err
	}
	return name, nil
}

// riverVersionTag changes the template name when River's migrations change.
const riverVersionTag = "river-v0.51.2"

// NewPool returns a pool on a fresh database with every migration applied.
// The database is dropped when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return newPool(t, migratedTemplate(t))
}

// NewEmptyPool returns a pool on a fresh, empty database.
func NewEmptyPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return newPool(t, "template0")
}

// NewURL returns the URL of a fresh migrated database (for tests that start
// hookline as a subprocess). The database is dropped when the test ends.
func NewURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, migratedTemplate(t))
}

func newDatabase(t testing.TB, template string) string {
	t.Helper()
	admin := ServerURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("hookline_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, counter.Add(1))
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	var lastErr error
	for range 20 { // CREATE DATABASE fails while another session briefly uses the template
		if _, lastErr = conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+template); lastErr == nil {
			break
		}
		if !strings.Contains(lastErr.Error(), "being accessed by other users") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lastErr != nil {
		t.Fatalf("pgtest: create database: %v", lastErr)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	return WithDatabase(admin, name)
}

func newPool(t testing.TB, template string) *pgxpool.Pool {
	t.Helper()
	u := newDatabase(t, template)
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Cluster starts a dedicated cluster for a test that stops or kills
// Postgres, and returns it with the URL of a migrated database on it. It
// skips the test when no local PostgreSQL binaries exist (a shared server
// from TEST_DATABASE_URL cannot be stopped by a test).
func Cluster(t testing.TB) (*pgcluster.Cluster, string) {
	t.Helper()
	return cluster(t, true)
}

// DurableCluster is Cluster with fsync and synchronous commit on, as in
// production: for tests that kill Postgres and then check that every commit
// it acknowledged survived. Restart it with Fast false as well.
func DurableCluster(t testing.TB) (*pgcluster.Cluster, string) {
	t.Helper()
	return cluster(t, false)
}

func cluster(t testing.TB, fast bool) (*pgcluster.Cluster, string) {
	t.Helper()
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skipf("needs local PostgreSQL binaries to stop and restart a server: %v", err)
	}
	dir, err := os.MkdirTemp("", "hookline-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755) // the server runs as another user when we are root
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{Dir: dir, Fast: fast})
	if err != nil {
		t.Fatalf("pgtest: cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := migrations.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	return c, c.URL("postgres")
}

// ExampleTB returns the part of testing.TB that pgtest uses, for Example
// functions, which have none: failures panic, and the cleanups (dropping the
// database) run when done is called.
func ExampleTB() (tb testing.TB, done func()) {
	t := &exampleTB{}
	return t, t.runCleanups
}

type exampleTB struct {
	testing.TB // nil; calling a method not defined below panics
	cleanups   []func()
}

func (*exampleTB) Helper()                      {}
func (*exampleTB) Name() string                 { return "Example" }
func (*exampleTB) Logf(string, ...any)          {}
func (*exampleTB) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (*exampleTB) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (*exampleTB) Errorf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (*exampleTB) Skipf(f string, args ...any)  { panic(fmt.Sprintf("skip: "+f, args...)) }
func (t *exampleTB) Cleanup(f func())           { t.cleanups = append(t.cleanups, f) }
func (t *exampleTB) runCleanups() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
