// Package proctest runs the hookline binary as a subprocess in tests: it
// builds cmd/hookline once per test process (with -race), starts it with its
// output captured, waits until it answers /healthz, and kills it when the
// test ends. Tests that crash, drain or restart real processes share it.
//
// Internal: no stability promise.
package proctest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/hookline once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hookline-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "hookline")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, "github.com/hookline/hookline/cmd/hookline").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("proctest: build hookline: %v", buildErr)
	}
	return binPath
}

// FreeAddr returns a loopback address with a free port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// WriteConfig writes body to a hookline.yaml in a test directory.
func WriteConfig(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hookline.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatalf("proctest: %v", err)
	}
	return p
}

// Buffer is a bytes.Buffer safe for concurrent writers (a process's stdout
// and stderr, a logger) and readers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// Proc is a running hookline subprocess.
type Proc struct {
	Cmd *exec.Cmd
	// Addr is the address it was told to listen on.
	Addr string
	// Exited is closed when the process has exited.
	Exited chan struct{}
	out    *Buffer
}

// Out returns everything the process printed so far.
func (p *Proc) Out() string { return p.out.String() }

// BaseURL is "http://" + Addr.
func (p *Proc) BaseURL() string { return "http://" + p.Addr }

// Start runs `hookline args...` with env added to the environment, without
// waiting for it. The test's cleanup kills it and, if the test failed, logs
// its output.
func Start(t testing.TB, addr string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	out := &Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// The race runtime otherwise pauses 1s at every exit.
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), env...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("proctest: start hookline: %v", err)
	}
	p := &Proc{Cmd: cmd, Addr: addr, Exited: make(chan struct{}), out: out}
	go func() { _ = cmd.Wait(); close(p.Exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.Exited
		if t.Failed() {
			t.Logf("hookline %v output:\n%s", args, out.String())
		}
	})
	return p
}

// Serve runs `hookline serve --config cfgPath args...` and waits until it
// answers /healthz.
func Serve(t testing.TB, cfgPath, addr string, args ...string) *Proc {
	t.Helper()
	p := Start(t, addr, nil, append([]string{"serve", "--config", cfgPath}, args...)...)
	p.WaitHealthy(t, 90*time.Second)
	return p
}

// WaitHealthy waits until the process answers /healthz with 200, failing the
// test at once if it exits, or after within.
func (p *Proc) WaitHealthy(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := http.Get(p.BaseURL() + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.Exited:
			t.Fatalf("hookline exited before answering /healthz:\n%s", p.Out())
		case <-deadline:
			t.Fatalf("hookline did not answer /healthz within %s:\n%s", within, p.Out())
		case <-tick.C:
		}
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.Exited
}
