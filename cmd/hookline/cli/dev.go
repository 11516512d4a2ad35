package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgcluster"
)

// Demo values `hookline dev` serves and prints. Not secret: for local use only.
const (
	demoSecret     = "whsec_hookline_demo_secret"
	demoAdminToken = "dev-admin-token"
	devDir         = ".hookline"
)

// devUsage is the help of `hookline dev`.
const devUsage = `usage: hookline dev [--listen ADDR] [--otlp-endpoint URL]

Run hookline on a local Postgres (under ./.hookline, or $DATABASE_URL, or a
Docker container) with a demo source, and print a ready send line.
`

func (c *command) dev(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve on")
	otlp := fs.String("otlp-endpoint", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"),
		"OTLP/HTTP collector to send traces to, e.g. http://localhost:4318 (default $OTEL_EXPORTER_OTLP_ENDPOINT; empty: none)")
	if err := parseFlags(fs, args, stdout, devUsage); err != nil {
		return err
	}
	// The flags are checked before a database is started (or reached):
	// a mistyped --listen is bad usage, named, not a PostgreSQL start-up.
	if err := c.checkDevFlags(*listen, *otlp); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := newLogger(stderr, "text", "info")

	dbURL, cleanup, err := devDatabase(ctx, stdout)
	if err != nil {
		return err
	}
	defer cleanup()

	host := devHost(*listen)
	cfgYAML := devConfig(*listen, host, dbURL, *otlp)
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		return err
	}
	cfgPath := filepath.Join(devDir, "dev.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgYAML), 0o600); err != nil {
		return err
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	setMemoryLimit(cfg)
	a, err := app.New(ctx, cfg, app.Options{Role: app.RoleAll, Logger: log, Handlers: c.handlers, Mount: func(s *ingest.Server) {
		s.Echo().POST("/dev/sink/:source", func(c echo.Context) error {
			r := c.Request()
			log.Info("demo sink received an event", "source", c.Param("source"),
				"idempotency_key", r.Header.Get("Idempotency-Key"), "attempt", r.Header.Get("Hookline-Attempt"),
				"event_type", r.Header.Get("Hookline-Event-Type"))
			return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
		})
	}})
	if err != nil {
		return err
	}
	self := os.Args[0]
	if strings.Contains(self, "go-build") {
		self = "go run ./cmd/hookline"
	}
	return a.Run(ctx, func() {
		fmt.Fprintf(stdout, `
hookline dev is ready
  webhooks:  POST http://%[1]s/webhooks/demo   (provider stripe)
  demo secret: %[2]s
  console:   http://%[1]s/admin/ui/   (log in with the admin token)
  admin token: %[3]s   (curl -H 'Authorization: Bearer %[3]s' http://%[1]s/admin/dead)
  metrics:   http://%[1]s/metrics
  traces:    %[6]s
  config:    %[4]s

Send a signed demo event (run it twice: accepted, then duplicate):
  %[5]s send --config %[4]s --source demo --event-id evt_demo_1

Press Ctrl-C to stop.
`, host, demoSecret, demoAdminToken, cfgPath, self, tracesLine(*otlp))
	})
}

// tracesLine says where `hookline dev` sends traces, or how to send them.
func tracesLine(endpoint string) string {
	if endpoint == "" {
		return "not exported (OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 make run sends them to a local collector)"
	}
	return "sent to " + endpoint + " (OTLP/HTTP)"
}

// devDatabase finds a database for `hookline dev`: $DATABASE_URL, else a
// cluster from local PostgreSQL binaries under ./.hookline/pg (reused next
// time), else a Docker container, else an error saying how to get either.
func devDatabase(ctx context.Context, stdout io.Writer) (string, func(), error) {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		fmt.Fprintln(stdout, "using DATABASE_URL")
		return u, func() {}, nil
	}
	if _, err := pgcluster.FindBinDir(); err == nil {
		dir, err := filepath.Abs(filepath.Join(devDir, "pg"))
		if err != nil {
			return "", nil, err
		}
		if os.Geteuid() == 0 && !othersCanReach(filepath.Dir(dir)) {
			// PostgreSQL runs as the postgres user, which cannot reach a
			// directory under a private parent (like /root).
			alt := filepath.Join(os.TempDir(), "hookline-dev-"+strconv.Itoa(int(hash(dir))), "pg")
			fmt.Fprintf(stdout, "note: %s is not reachable by the postgres user; keeping the dev cluster in %s\n", dir, alt)
			dir = alt
		}
		fmt.Fprintf(stdout, "starting PostgreSQL in %s ...\n", dir)
		logFile, _ := os.OpenFile(filepath.Join(filepath.Dir(dir), "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if logFile == nil {
			_ = os.MkdirAll(filepath.Dir(dir), 0o755)
			logFile, _ = os.OpenFile(filepath.Join(filepath.Dir(dir), "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		}
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Log: logFile})
		if err != nil {
			return "", nil, fmt.Errorf("start local PostgreSQL: %w", err)
		}
		fmt.Fprintf(stdout, "PostgreSQL listening on 127.0.0.1:%d (socket in %s)\n", c.Port, c.Socket)
		return c.URL("postgres"), func() { _ = c.Stop() }, nil
	}
	if exec.Command("docker", "info").Run() == nil {
		return dockerDatabase(ctx, stdout)
	}
	return "", nil, errors.New("no database: set DATABASE_URL, or install PostgreSQL binaries " +
		"(Debian/Ubuntu: sudo apt-get install postgresql; macOS: brew install postgresql), " +
		"or start Docker so hookline dev can run a postgres container")
}

func othersCanReach(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil && st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

func hash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

func dockerDatabase(ctx context.Context, stdout io.Writer) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	name := "hookline-dev-" + strconv.Itoa(os.Getpid())
	fmt.Fprintln(stdout, "starting PostgreSQL in Docker ...")
	out, err := exec.CommandContext(ctx, "docker", "run", "-d", "--rm", "--name", name,
		"-p", fmt.Sprintf("127.0.0.1:%d:5432", port), "-e", "POSTGRES_PASSWORD=hookline",
		"-v", "hookline-dev-pg:/var/lib/postgresql/data", "postgres:16-alpine").CombinedOutput()
	if err != nil {
		return "", nil, fmt.Errorf("docker run postgres: %w: %s", err, out)
	}
	stop := func() { _ = exec.Command("docker", "stop", name).Run() }
	u := fmt.Sprintf("postgres://postgres:hookline@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if exec.Command("docker", "exec", name, "pg_isready", "-U", "postgres").Run() == nil {
			return u, stop, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	stop()
	return "", nil, errors.New("the postgres container did not become ready within 60s")
}

// devHost is the host:port the demo's URLs use for a --listen address
// (":8080" is reached on 127.0.0.1).
func devHost(listen string) string {
	if strings.HasPrefix(listen, ":") {
		return "127.0.0.1" + listen
	}
	return listen
}

// devConfig is the configuration hookline dev writes to .hookline/dev.yaml.
// host is where its demo destination is reached (devHost).
func devConfig(listen, host, dbURL, otlp string) string {
	return fmt.Sprintf(`# Written by hookline dev: a demo source whose events go to a built-in sink.
listen: %q
database_url: %q
admin_token: %q
log: {format: text}
shutdown_timeout: 10s
sources:
  - name: demo
    provider: stripe
    secrets: [%q]
    on_duplicate: skip
    lease: 30s
    destination:
      url: "http://%s/dev/sink/demo"
      max_attempts: 5
      backoff: {min: 1s, max: 30s}
tracing: {otlp_endpoint: %q}
`, listen, dbURL, demoAdminToken, demoSecret, host, otlp)
}

// checkDevFlags validates --listen and --otlp-endpoint as the demo
// configuration would use them, before any database is started: an error
// is bad usage (exit 2) naming the flag.
func (c *command) checkDevFlags(listen, otlp string) error {
	// The demo destination's host is fixed here so that a bad --listen is
	// reported as the listen address it is, not as the URL derived from it.
	cfg, err := config.Parse([]byte(devConfig(listen, "127.0.0.1:8080", "postgres://hookline@127.0.0.1:5432/hookline", otlp)),
		os.Getenv)
	if err == nil {
		err = app.Check(cfg, app.Options{Role: app.RoleAll, Handlers: c.handlers})
	}
	if err == nil {
		return nil
	}
	var fe *config.FieldError
	if errors.As(err, &fe) {
		switch fe.Path {
		case "listen":
			return &exitError{2, fmt.Errorf("dev: --listen: %s", fe.Msg)}
		case "tracing.otlp_endpoint":
			return &exitError{2, fmt.Errorf("dev: --otlp-endpoint: %s", fe.Msg)}
		}
	}
	return &exitError{2, fmt.Errorf("dev: %w", err)}
}
