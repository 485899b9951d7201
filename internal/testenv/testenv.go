// Package testenv gives tests the real external parts feval works with: the
// reference OCI registry, and the oras and cosign CLIs, all built into the
// repository's bin/ directory by 'make tools'. A missing tool fails the test with
// the command that installs it; tests never silently skip the real part.
package testenv

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// RepoRoot returns the directory holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Tool returns the path of a tool in bin/, failing the test if it is absent.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not built: run 'make tools' (it installs the registry, oras and cosign into bin/)", p)
	}
	return p
}

// Registry is a running reference registry on 127.0.0.1.
type Registry struct {
	Addr string // host:port
	Root string // its storage directory
	cmd  *exec.Cmd
	log  *os.File
}

// StartRegistry starts the reference registry with a temporary root on a free
// loopback port and stops it when the test ends.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	r, err := Start(Tool(t, "registry"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// BinDir returns the repository's bin/ directory, found from the working
// directory, or "" outside the repository.
func BinDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "bin")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Start runs the registry binary bin with its storage under dir on a free
// loopback port and waits until it answers. The caller must Stop it.
func Start(bin, dir string) (*Registry, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s is not built: run 'make tools'", bin)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	root := filepath.Join(dir, "storage")
	cfg := fmt.Sprintf("version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}, delete: {enabled: true}}\nhttp: {addr: %s}\n", root, addr)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	r := &Registry{Addr: addr, Root: root, cmd: cmd, log: logf}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			return r, nil
		}
		if time.Now().After(deadline) {
			r.Stop()
			log, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
			return nil, fmt.Errorf("registry did not start on %s: %v\n%s", addr, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the registry process.
func (r *Registry) Stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.log.Close()
}

// BlobPath is where the registry keeps the content of d on disk.
func (r *Registry) BlobPath(hex string) string {
	return filepath.Join(r.Root, "docker/registry/v2/blobs/sha256", hex[:2], hex, "data")
}
