// Package pgcluster starts a throwaway or reusable PostgreSQL cluster from the
// local PostgreSQL binaries (initdb, postgres). `hookline dev`, the test
// database helper and the benchmark harness use it. The server runs as a child
// of the current process and is told to shut down immediately if the process
// dies (Linux parent-death signal), so a killed test run leaves no server
// behind. When running as root (where initdb refuses to run) the cluster runs
// as the `postgres` OS user.
//
// Internal: no stability promise.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries means no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("no PostgreSQL binaries found (looked for initdb on PATH, in `pg_config --bindir` and /usr/lib/postgresql/*/bin); install them (Debian/Ubuntu: apt-get install postgresql) or set DATABASE_URL")

// FindBinDir returns the directory holding initdb and postgres: from PATH,
// then `pg_config --bindir`, then the newest /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if fileExists(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Options configure Start.
type Options struct {
	// Dir holds the data directory (Dir/data) and the socket directory. It is
	// created if missing and reused when it already holds a cluster.
	Dir string
	// Port to listen on (127.0.0.1); 0 picks a free one.
	Port int
	// Fast turns off fsync and synchronous commit: for tests only.
	Fast bool
	// Log receives the server's output; nil discards it.
	Log *os.File
}

// Cluster is a running PostgreSQL server.
type Cluster struct {
	Dir    string
	Port   int
	Socket string
	cmd    *exec.Cmd
	done   chan struct{}
}

// Start initdb's Dir/data when it is new, then starts the server and waits
// until it accepts connections.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Unix socket paths are limited to ~107 bytes: use a short directory.
	sock, err := os.MkdirTemp("", "hlpg")
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		for _, p := range []string{dir, sock} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
		if fileExists(data) {
			_ = chownTree(data, int(cred.Uid), int(cred.Gid))
		}
	}
	if !fileExists(filepath.Join(data, "PG_VERSION")) {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb %s: %w\n%s", data, err, out)
		}
	}
	if pid, live := runningServer(data); live {
		return nil, fmt.Errorf("%w: pid %d already serves %s (another hookline dev in this directory?); stop it first, or use another directory", ErrInUse, pid, data)
	}
	// The lock file of a server that is gone (a crash, a SIGKILL) would make
	// the next start wait, or refuse when its pid was reused.
	_ = os.Remove(filepath.Join(data, "postmaster.pid"))
	port := opts.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-k", sock, "-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=300", "-c", "shared_buffers=128MB"}
	if opts.Fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if opts.Log != nil {
		cmd.Stdout, cmd.Stderr = opts.Log, opts.Log
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c := &Cluster{Dir: dir, Port: port, Socket: sock, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// ErrInUse means a PostgreSQL server is already running on the data
// directory Start was asked to serve.
var ErrInUse = errors.New("the PostgreSQL data directory is in use")

// runningServer reports whether the server named by data's postmaster.pid
// is alive: its pid exists and is a postgres process. A pid file left by a
// server that died, or whose pid now belongs to another program, is stale.
func runningServer(data string) (int, bool) {
	raw, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, false
	}
	if comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); err == nil {
		return pid, strings.HasPrefix(strings.TrimSpace(string(comm)), "postgres")
	}
	return pid, true // no /proc to ask: a live pid is taken for the server
}

func chownTree(root string, uid, gid int) error {
	return filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// runAs returns the credentials to run PostgreSQL with: the postgres user when
// we are root, nil otherwise.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses to run as root: create a postgres user (apt-get install postgresql does) or run as another user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, c.URL("postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited during start-up (see its log): %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %s: %w", limit, err)
		}
	}
}

// URL returns a connection URL for database db over TCP.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Stop shuts the server down (fast mode) and waits for it.
func (c *Cluster) Stop() error {
	if c.cmd.Process == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	_ = os.RemoveAll(c.Socket)
	return nil
}

// Kill stops the server abruptly (SIGKILL to the postmaster), simulating a
// crash; the children exit when they notice. Restart with Start on the same Dir.
func (c *Cluster) Kill() {
	if c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

// Done is closed when the server process exits.
func (c *Cluster) Done() <-chan struct{} { return c.done }
